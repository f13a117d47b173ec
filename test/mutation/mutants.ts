import ts from 'typescript';
import type { MutatedModule } from './modules.ts';

/** One change to one source file: replace [start, end) with `replacement`. */
export interface Mutant {
  file: string;
  area: string;
  /** Stable across edits elsewhere in the file: the enclosing function, the code changed and how. */
  id: string;
  line: number;
  start: number;
  end: number;
  replacement: string;
  operator: string;
}

const BINARY: Partial<Record<ts.SyntaxKind, string[]>> = {
  [ts.SyntaxKind.LessThanToken]: ['<='],
  [ts.SyntaxKind.LessThanEqualsToken]: ['<'],
  [ts.SyntaxKind.GreaterThanToken]: ['>='],
  [ts.SyntaxKind.GreaterThanEqualsToken]: ['>'],
  [ts.SyntaxKind.EqualsEqualsEqualsToken]: ['!=='],
  [ts.SyntaxKind.ExclamationEqualsEqualsToken]: ['==='],
  [ts.SyntaxKind.EqualsEqualsToken]: ['!='],
  [ts.SyntaxKind.ExclamationEqualsToken]: ['=='],
  [ts.SyntaxKind.AmpersandAmpersandToken]: ['||'],
  [ts.SyntaxKind.BarBarToken]: ['&&'],
  [ts.SyntaxKind.PlusToken]: ['-'],
  [ts.SyntaxKind.MinusToken]: ['+'],
  [ts.SyntaxKind.AsteriskToken]: ['/'],
  [ts.SyntaxKind.SlashToken]: ['*'],
  [ts.SyntaxKind.PercentToken]: ['*'],
  [ts.SyntaxKind.GreaterThanGreaterThanToken]: ['<<'],
  [ts.SyntaxKind.LessThanLessThanToken]: ['>>'],
  [ts.SyntaxKind.PlusEqualsToken]: ['-='],
  [ts.SyntaxKind.MinusEqualsToken]: ['+='],
};

/** Methods whose swap for a sibling changes meaning while still running. */
const METHODS: Record<string, string> = {
  min: 'max',
  max: 'min',
  floor: 'ceil',
  ceil: 'floor',
  some: 'every',
  every: 'some',
  startsWith: 'endsWith',
  endsWith: 'startsWith',
};

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 70);

/** The name of the function, method or class `node` sits in, dotted from the outside in. */
function scopeOf(node: ts.Node): string {
  const names: string[] = [];
  for (let n: ts.Node | undefined = node.parent; n; n = n.parent) {
    if (
      (ts.isFunctionDeclaration(n) ||
        ts.isMethodDeclaration(n) ||
        ts.isClassDeclaration(n) ||
        ts.isGetAccessor(n) ||
        ts.isSetAccessor(n) ||
        ts.isPropertyDeclaration(n)) &&
      n.name
    )
      names.unshift(n.name.getText());
    else if (ts.isConstructorDeclaration(n)) names.unshift('constructor');
    else if (ts.isVariableDeclaration(n) && ts.isIdentifier(n.name) && n.parent.parent && ts.isVariableStatement(n.parent.parent)) names.unshift(n.name.text);
    else if (ts.isPropertyAssignment(n) && (ts.isFunctionExpression(n.initializer) || ts.isArrowFunction(n.initializer))) names.unshift(n.name.getText());
  }
  return names.join('.') || '(module)';
}

const isNameOfProperty = (node: ts.Node) => (ts.isPropertyAssignment(node.parent) || ts.isPropertyDeclaration(node.parent)) && node.parent.name === node;

/** Every mutant of one module's source, in source order. */
export function mutantsOf(module: MutatedModule, source: string): Mutant[] {
  const sf = ts.createSourceFile(module.file, source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const found: Mutant[] = [];
  const seen = new Map<string, number>();
  const add = (node: ts.Node, start: number, end: number, replacement: string, operator: string, what = node.getText(sf)) => {
    const base = `${module.file} ${scopeOf(node)}: ${operator} in \`${oneLine(what)}\``;
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    found.push({
      file: module.file,
      area: module.area,
      id: n === 1 ? base : `${base} #${n}`,
      line: sf.getLineAndCharacterOfPosition(start).line + 1,
      start,
      end,
      replacement,
      operator,
    });
  };
  const inScope = (node: ts.Node) => !module.only || module.only.some((name) => scopeOf(node).split('.').includes(name));

  const visit = (node: ts.Node): void => {
    // Types, imports and declarations of shapes have no behaviour to mutate.
    if (
      ts.isTypeNode(node) ||
      ts.isImportDeclaration(node) ||
      ts.isExportDeclaration(node) ||
      ts.isInterfaceDeclaration(node) ||
      ts.isTypeAliasDeclaration(node) ||
      ts.isModuleDeclaration(node)
    )
      return;
    if (inScope(node)) mutate(node);
    ts.forEachChild(node, visit);
  };

  const mutate = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node)) {
      for (const to of BINARY[node.operatorToken.kind] ?? []) {
        const op = node.operatorToken;
        add(node, op.getStart(sf), op.getEnd(), to, `${op.getText(sf)} → ${to}`);
      }
    } else if (ts.isPrefixUnaryExpression(node)) {
      if (node.operator === ts.SyntaxKind.ExclamationToken) add(node, node.getStart(sf), node.operand.getStart(sf), '', 'drop !');
      if (node.operator === ts.SyntaxKind.PlusPlusToken) add(node, node.getStart(sf), node.operand.getStart(sf), '--', '++ → --');
      if (node.operator === ts.SyntaxKind.MinusMinusToken) add(node, node.getStart(sf), node.operand.getStart(sf), '++', '-- → ++');
    } else if (ts.isPostfixUnaryExpression(node)) {
      const end = node.getEnd();
      if (node.operator === ts.SyntaxKind.PlusPlusToken) add(node, end - 2, end, '--', '++ → --');
      if (node.operator === ts.SyntaxKind.MinusMinusToken) add(node, end - 2, end, '++', '-- → ++');
    } else if (node.kind === ts.SyntaxKind.TrueKeyword) {
      add(node, node.getStart(sf), node.getEnd(), 'false', 'true → false', node.parent.getText(sf));
    } else if (node.kind === ts.SyntaxKind.FalseKeyword) {
      add(node, node.getStart(sf), node.getEnd(), 'true', 'false → true', node.parent.getText(sf));
    } else if (ts.isNumericLiteral(node) && !isNameOfProperty(node)) {
      const value = Number(node.text);
      add(node, node.getStart(sf), node.getEnd(), String(value + 1), `${node.getText(sf)} → ${value + 1}`, node.parent.getText(sf));
    } else if (ts.isIfStatement(node) || ts.isConditionalExpression(node) || ts.isWhileStatement(node)) {
      const condition = ts.isIfStatement(node) || ts.isWhileStatement(node) ? node.expression : node.condition;
      add(condition, condition.getStart(sf), condition.getEnd(), '(true)', 'condition → true', condition.getText(sf));
      if (!ts.isWhileStatement(node)) add(condition, condition.getStart(sf), condition.getEnd(), '(false)', 'condition → false', condition.getText(sf));
    } else if (ts.isExpressionStatement(node) && ts.isBlock(node.parent)) {
      add(node, node.getStart(sf), node.getEnd(), ';', 'remove statement');
    } else if (
      ts.isPropertyAccessExpression(node) &&
      Object.hasOwn(METHODS, node.name.text) &&
      ts.isCallExpression(node.parent) &&
      node.parent.expression === node
    ) {
      const to = METHODS[node.name.text]!;
      add(node, node.name.getStart(sf), node.name.getEnd(), to, `${node.name.text} → ${to}`, node.parent.getText(sf));
    } else if (module.strings && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node))) {
      // Error texts and codes are what people read, not what the module computes.
      if (ts.isNewExpression(node.parent) || ts.isTemplateSpan(node.parent) || node.getText(sf).length <= 2) return;
      add(node, node.getStart(sf), node.getEnd(), '""', 'string → ""');
    }
  };
  visit(sf);
  return found;
}

/** The source with one mutant applied. */
export function applyMutant(source: string, mutant: Mutant): string {
  return source.slice(0, mutant.start) + mutant.replacement + source.slice(mutant.end);
}
