import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The layers, top first: a file imports from its own layer or one below it, never above, never outside. */
const LAYERS = ['app', 'http', 'actors', 'providers', 'runtime', 'persistence', 'domain'];

/**
 * The actor kinds' folders, top first: a kind's files import from its own folder or a folder below it. A kind
 * sends to one above it by the protocol map (actors/kinds.ts), whose types name every kind; the files at the
 * top of actors/ (that map, the deps, the recovery that spans kinds) sit outside this order.
 */
const ACTOR_FOLDERS = ['workspace', 'generation', 'webhook', 'billing'];

type Edge = [from: string, to: string];

/** Every .ts file under a folder, relative to the repository. */
function sources(folder: string): string[] {
  return readdirSync(path.join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => path.posix.join(folder, file.split(path.sep).join('/')));
}

/** A file's relative imports, resolved: static, `import type`, `export … from` and dynamic `import()`. */
function importsOf(file: string, text: string): string[] {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  return importedFiles
    .map((i) => i.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => path.posix.join(path.posix.dirname(file), spec));
}

const layerOf = (file: string): number => LAYERS.indexOf(file.split('/')[0]!);

/** Imports that climb to a higher layer or leave the layers. */
function upward(edges: Edge[]): Edge[] {
  return edges.filter(([from, to]) => layerOf(to) < 0 || layerOf(to) < layerOf(from));
}

/** The actors/ folder of a file (`generation` for actors/generation/machine.ts), or null for one at the top of actors/ or outside. */
function actorFolderOf(file: string): string | null {
  const parts = file.split('/');
  return parts[0] === 'actors' && parts.length > 2 ? parts[1]! : null;
}

/** Imports between actor kinds' folders that climb the order, or touch a folder that has no place in it. */
function kindUpward(edges: Edge[]): Edge[] {
  return edges.filter(([from, to]) => {
    const a = actorFolderOf(from);
    const b = actorFolderOf(to);
    if (a === null || b === null || a === b) return false;
    return !ACTOR_FOLDERS.includes(a) || !ACTOR_FOLDERS.includes(b) || ACTOR_FOLDERS.indexOf(b) < ACTOR_FOLDERS.indexOf(a);
  });
}

/** The circles among files: each strongly connected set of more than one file, found by Tarjan's algorithm. */
function circles(edges: Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const [from, to] of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1) found.push(group.sort());
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** One shortest way round a circle, `a -> b -> a`, for the message. */
function wayRound(group: string[], edges: Edge[]): string {
  const start = group[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const [a, w] of edges) {
      if (a !== v || !group.includes(w) || cameFrom.has(w)) continue;
      cameFrom.set(w, v);
      if (w === start) queue.length = 0;
      else queue.push(w);
    }
  }
  const way: string[] = [];
  for (let v = cameFrom.get(start)!; v !== start; v = cameFrom.get(v)!) way.unshift(v);
  return [start, ...way, start].join(' -> ');
}

t.test('the checks find an import that climbs and a circle', async (t) => {
  const edges: Edge[] = [
    ['http/a.ts', 'actors/b.ts'],
    ['actors/b.ts', 'domain/c.ts'],
    ['persistence/d.ts', 'runtime/e.ts'],
    ['runtime/e.ts', 'bench/f.ts'],
    ['actors/g.ts', 'actors/h.ts'],
    ['actors/h.ts', 'actors/i.ts'],
    ['actors/i.ts', 'actors/g.ts'],
  ];
  t.same(upward(edges), [
    ['persistence/d.ts', 'runtime/e.ts'],
    ['runtime/e.ts', 'bench/f.ts'],
  ]);
  t.same(circles(edges), [['actors/g.ts', 'actors/h.ts', 'actors/i.ts']]);
  t.same(
    kindUpward([
      ['actors/workspace/a.ts', 'actors/generation/b.ts'],
      ['actors/generation/b.ts', 'actors/workspace/protocol.ts'],
      ['actors/billing/c.ts', 'actors/webhook/d.ts'],
      ['actors/generation/b.ts', 'actors/kinds.ts'],
      ['actors/kinds.ts', 'actors/workspace/protocol.ts'],
      ['actors/generation/b.ts', 'actors/generation/e.ts'],
      ['actors/newkind/f.ts', 'actors/billing/c.ts'],
      ['actors/billing/local/g.ts', 'actors/billing/c.ts'],
    ]),
    [
      ['actors/generation/b.ts', 'actors/workspace/protocol.ts'],
      ['actors/billing/c.ts', 'actors/webhook/d.ts'],
      ['actors/newkind/f.ts', 'actors/billing/c.ts'],
    ],
  );
  t.same(circles(edges.slice(0, 6)), []);
  t.equal(wayRound(circles(edges)[0]!, edges), 'actors/g.ts -> actors/h.ts -> actors/i.ts -> actors/g.ts');

  const read = importsOf(
    'http/x.ts',
    [
      "import type { A } from '../actors/a.ts';",
      "export { B } from './b.ts';",
      "export type { C } from '../domain/c.ts';",
      "const d = await import('../runtime/d.ts');",
      "import { e } from 'node:fs';",
    ].join('\n'),
  );
  t.same(read.sort(), ['actors/a.ts', 'domain/c.ts', 'http/b.ts', 'runtime/d.ts']);
});

t.test('imports run down the layers, with no circle between files', async (t) => {
  const edges: Edge[] = [];
  for (const file of LAYERS.flatMap(sources)) {
    for (const to of importsOf(file, readFileSync(path.join(ROOT, file), 'utf8'))) edges.push([file, to]);
  }
  t.ok(edges.length > 1000, `the imports were read (${edges.length})`);
  t.same(
    upward(edges).map(([a, b]) => `${a} -> ${b}`),
    [],
    `order, top first: ${LAYERS.join(' -> ')}`,
  );
  t.same(
    circles(edges).map((group) => wayRound(group, edges)),
    [],
    'circles, each by one way round',
  );
  t.same(
    kindUpward(edges).map(([a, b]) => `${a} -> ${b}`),
    [],
    `actor kinds, top first: ${ACTOR_FOLDERS.join(' -> ')}`,
  );
  t.same(
    readdirSync(path.join(ROOT, 'actors'), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort(),
    [...ACTOR_FOLDERS].sort(),
    'every folder of actors/ has its place in the order',
  );
});

t.test("the README's layout table names every folder, and only those", async (t) => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('| folder | holds |'));
  const named = [...table.slice(0, table.indexOf('\n\n')).matchAll(/^\| `([^`]+)\/` \|/gm)].map((m) => m[1]!).sort();
  // dist/: what `npm run build` compiles (ignored by git, made by every install).
  const ignored = new Set(['node_modules', 'coverage', 'dist']);
  const folders = readdirSync(ROOT, { withFileTypes: true })
    .filter((e) => e.isDirectory() && (!e.name.startsWith('.') || e.name === '.ci') && !ignored.has(e.name))
    .map((e) => e.name)
    .sort();
  t.same(named, folders);
  for (const layer of LAYERS) t.ok(named.includes(layer), `${layer}/ is in the table`);
});
