import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { bundledScript } from '../fixtures/child-bundle.ts';
import { ROOT } from '../fixtures/child.ts';

// A child's bundle: built from the files as they are, rebuilt when one changes, and each module still finds
// itself where its source is (import.meta.url).
t.test('a bundle follows its files and keeps each module at its own URL', (t) => {
  const dir = path.join(ROOT, '.scratch', `child-bundle-${process.pid}`);
  mkdirSync(path.join(dir, 'deep'), { recursive: true });
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = path.relative(ROOT, path.join(dir, 'entry.ts'));
  const dep = path.join(dir, 'deep', 'dep.ts');
  writeFileSync(
    path.join(dir, 'entry.ts'),
    "import { here, value } from './deep/dep.ts';\nconsole.log(JSON.stringify({ here, value: value satisfies number }));\n",
  );
  const writeDep = (value: number) => writeFileSync(dep, `export const here: string = import.meta.url;\nexport const value = ${value};\n`);
  const run = (file: string) => JSON.parse(execFileSync(process.execPath, [file], { encoding: 'utf8' })) as { here: string; value: number };

  writeDep(1);
  const first = bundledScript(script);
  t.ok(first.endsWith(`${script.replace(/\.ts$/, '.js')}`), 'the bundle sits at the script path with .js');
  t.same(run(first), { here: pathToFileURL(dep).href, value: 1 }, "the imported module's import.meta.url is its source's");
  t.equal(bundledScript(script), first, 'nothing changed: the same bundle');

  writeDep(2);
  const second = bundledScript(script);
  t.not(second, first, 'an imported file changed: a new bundle');
  t.same(run(second), { here: pathToFileURL(dep).href, value: 2 }, 'built from the file as it is now');
  t.same(run(first).value, 1, 'the earlier bundle is left as it was, for a child that read its manifest before');

  rmSync(dep);
  t.throws(
    () => bundledScript(script),
    /bundling .*entry\.ts failed: .*Could not resolve/s,
    'a file it needs gone: the build fails, no stale bundle is answered',
  );
  t.end();
});
