/**
 * `npm test` runs the suite compiled, without a loader: this script type-checks the project and emits it as
 * JavaScript into `.build/` (TypeScript's own emitter, `tsconfig.test.json`, relative `.ts` imports rewritten
 * to `.js`), then mirrors every other file of the repository there as a symbolic link (sources, docs,
 * node_modules, package.json, built assets), so that a path taken relative to a module or to the working
 * directory finds what it finds in the repository. Last it writes `.build/.taprc`: the package's tap
 * configuration, for the compiled files and without the tsx loader.
 *
 * Why (README.md, Tests): with a loader's hooks registered, Node 20 sends each module it loads to the hooks'
 * thread and back; for the service's module graph (about 300 of our files, 2,000 of its dependencies') that
 * cost each test process about 4 s of CPU more than loading the same graph compiled.
 * `npx tap test/x.test.ts` still runs a file from its source through tsx.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
const OUT = path.join(ROOT, '.build');
/** Not mirrored: the output itself, git's data, and what tests and tap write while they run. */
const SKIP = new Set(['.build', '.git', '.data', '.tap', 'coverage']);

fs.rmSync(OUT, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.test.json'], { cwd: ROOT, stdio: 'inherit' });
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

/** Links each entry of `from` that the compiler did not write into `to`, going into the folders both have. */
function mirror(from: string, to: string): void {
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    if (from === ROOT && SKIP.has(entry.name)) continue;
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    const written = fs.lstatSync(target, { throwIfNoEntry: false });
    if (!written) fs.symlinkSync(source, target);
    else if (written.isDirectory() && entry.isDirectory()) mirror(source, target);
  }
}
mirror(ROOT, OUT);

const tap = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).tap as Record<string, unknown>;
const config = {
  ...tap,
  include: (tap.include as string[]).map((glob) => glob.replace(/\.ts$/, '.js')),
  // The compiled files need no loader. Source maps are written but not read by default (reading every
  // module's map costs each process about half a second): NODE_OPTIONS=--enable-source-maps names TypeScript lines.
  'node-arg': [],
};
// JSON is YAML: tap reads .taprc as YAML.
fs.writeFileSync(path.join(OUT, '.taprc'), `${JSON.stringify(config, null, 2)}\n`);
