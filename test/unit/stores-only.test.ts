import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The layers above persistence/: none of their files may hold a statement or touch the ORM. */
const ABOVE_PERSISTENCE = ['app', 'http', 'actors', 'providers', 'runtime', 'domain'];

/** Packages that speak SQL: the ORM, its query builder, the PostgreSQL driver. */
const SQL_PACKAGES = /^(@mikro-orm\/|knex$|pg$|pg\/)/;

/** persistence/ modules that only the stores use: the ORM's entities and the runners of raw statements. */
const STORE_ONLY_MODULES = /^persistence\/(entities\/|bound-query\.ts$|bound-sql\.ts$|stores\/orm\.ts$)/;

/** Methods of the ORM's entity manager, its connection and query builder (`db.em()`, `em.execute(…)`, …). */
const ORM_METHODS = new Set([
  'em',
  'execute',
  'getKnex',
  'getConnection',
  'getTransactionContext',
  'createQueryBuilder',
  'nativeInsert',
  'nativeUpdate',
  'nativeDelete',
  'persistAndFlush',
  'removeAndFlush',
  'transactional',
]);

/**
 * SQL text: a string or template literal holding a statement's shape, in any case: `select` and a column
 * followed by `,` or `from`, `insert into`, `update x [alias] set`, `delete from`, `on conflict`. Prose
 * ("Select a model from the catalog") does not take these shapes.
 */
const SQL_TEXT =
  /\bselect\s+(distinct\s+)?[\w."*():]+(\s+as\s+\w+)?\s*(,|from\s)|\binsert\s+into\s|\bupdate\s+[a-z_"]+(\s+[a-z_]+)?\s+set\s|\bdelete\s+from\s|\bon\s+conflict\b/i;

/**
 * Files outside persistence/ that still hold statements, each to move into persistence/stores/ by
 * aggregate. Empty: every statement is in persistence/. The list only shrinks: a listed file that no
 * longer holds any fails the test until it is taken off.
 */
const NOT_YET_MOVED: readonly string[] = [];

/** Every .ts file under a folder, relative to the repository. */
function sources(folder: string): string[] {
  return readdirSync(path.join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => path.posix.join(folder, file.split(path.sep).join('/')));
}

/** What in one file is SQL or the ORM, each finding as `line: what`. */
function sqlUses(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const note = (node: ts.Node, what: string): void => {
    found.push(`${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}: ${what}`);
  };
  const checkModule = (node: ts.Node, spec: string): void => {
    if (SQL_PACKAGES.test(spec)) note(node, `imports ${spec}`);
    else if (spec.startsWith('.') && STORE_ONLY_MODULES.test(path.posix.join(path.posix.dirname(file), spec))) note(node, `imports ${spec}`);
  };
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      checkModule(node, node.moduleSpecifier.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      checkModule(node, node.argument.literal.text);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteralLike(node.arguments[0])) {
        checkModule(node, node.arguments[0].text);
      } else if (ts.isPropertyAccessExpression(callee) && ORM_METHODS.has(callee.name.text) && callee.expression.kind !== ts.SyntaxKind.ThisKeyword) {
        note(node, `calls .${callee.name.text}()`);
      }
    } else if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      if (SQL_TEXT.test(node.text)) note(node, 'SQL text');
    } else if (ts.isTemplateExpression(node)) {
      const joined = [node.head.text, ...node.templateSpans.map((span) => span.literal.text)].join(' ? ');
      if (SQL_TEXT.test(joined)) note(node, 'SQL text');
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

t.test('the rule finds imports, ORM calls and SQL text, and not their look-alikes', async (t) => {
  const uses = (text: string) => sqlUses('http/routes/x/y.ts', text).map((f) => f.replace(/^\d+: /, ''));
  t.same(uses("import type { SqlEntityManager } from '@mikro-orm/postgresql';"), ['imports @mikro-orm/postgresql']);
  t.same(uses("import { ApiKeyEntity } from '../../../persistence/entities/api-key.ts';"), ['imports ../../../persistence/entities/api-key.ts']);
  t.same(uses("export type { Asset } from '../../../persistence/entities/asset.ts';"), ['imports ../../../persistence/entities/asset.ts']);
  t.same(uses("const { boundQuery } = await import('../../../persistence/bound-query.ts');"), ['imports ../../../persistence/bound-query.ts']);
  t.same(uses("type K = import('knex').Knex;"), ['imports knex']);
  t.same(uses('const em = services.db.em();'), ['calls .em()']);
  t.same(uses('await tx.execute(text, []);'), ['calls .execute()']);
  t.same(uses('await em.transactional(async () => {});'), ['calls .transactional()']);
  t.same(uses("await run('SELECT id FROM api_keys WHERE workspace_id = ?', [id]);"), ['SQL text']);
  t.same(uses(`const q = \`update generations g set status = $\{s} where id = ?\`;`), ['SQL text']);
  t.same(uses("const q = 'select count(*)::int as n from assets';"), ['SQL text']);
  t.same(uses("const q = 'insert into assets (id) values (?) on conflict do nothing';"), ['SQL text']);
  t.same(uses("const q = 'delete from sessions where expires_at < ?';"), ['SQL text']);
  // Look-alikes: a method of the same name on `this`, prose, imports of the stores.
  t.same(uses('await this.execute(command);'), []);
  t.same(uses("throw new ApiError('validation_error', 'Select a model from the catalog.');"), []);
  t.same(uses("throw new ApiError('conflict', 'Delete the assets first; update the key.');"), []);
  t.same(uses("import { findKey } from '../../../persistence/stores/keys/find.ts';"), []);
  t.same(uses("import type { ApiKey } from '../../../persistence/stores/keys/rows.ts';"), []);
});

t.test('no file outside persistence/ holds SQL or uses the ORM, but those not yet moved', async (t) => {
  const holding = new Map<string, string[]>();
  for (const file of ABOVE_PERSISTENCE.flatMap(sources)) {
    const uses = sqlUses(file, readFileSync(path.join(ROOT, file), 'utf8'));
    if (uses.length > 0) holding.set(file, uses);
  }
  const unlisted = [...holding].filter(([file]) => !NOT_YET_MOVED.includes(file)).map(([file, uses]) => `${file}: ${uses.join('; ')}`);
  t.same(unlisted, [], 'statements and ORM calls belong in persistence/stores/');
  const moved = NOT_YET_MOVED.filter((file) => !holding.has(file));
  t.same(moved, [], 'files that hold no statement any more: take them off NOT_YET_MOVED');
  t.same([...NOT_YET_MOVED].sort(), NOT_YET_MOVED, 'NOT_YET_MOVED is sorted');
});
