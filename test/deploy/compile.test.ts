import t, { type Test } from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CompileError, compileService } from '../../deploy/compile.ts';

/**
 * `npm run build` (deploy/compile.ts) on a type error: it fails, lists the error, emits nothing and leaves the
 * previous output in place. Run on a project of its own in a temporary folder (the service's compiler settings,
 * one file), so the real tree is neither broken nor built; the whole build is test/deploy/production-install.test.ts.
 */
async function project(t: Test, source: string): Promise<{ dir: string; tsconfig: string; outDir: string }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-compile-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  await fs.writeFile(path.join(dir, 'checked.ts'), source);
  // An ES module scope, as the repository's package.json gives the service's files.
  await fs.writeFile(path.join(dir, 'package.json'), '{"type":"module"}');
  const tsconfig = path.join(dir, 'tsconfig.json');
  const base = fileURLToPath(new URL('../../tsconfig.build.json', import.meta.url));
  // No @types lookup: the file needs none, and a temporary folder has no node_modules above it.
  await fs.writeFile(tsconfig, JSON.stringify({ extends: base, compilerOptions: { rootDir: dir, types: [] }, include: [path.join(dir, 'checked.ts')] }));
  const outDir = path.join(dir, 'dist');
  await fs.mkdir(outDir);
  await fs.writeFile(path.join(outDir, 'previous.txt'), 'the last good build');
  return { dir, tsconfig, outDir };
}

t.test('a type error fails the build, listed, and nothing is emitted', async (t) => {
  const { dir, tsconfig, outDir } = await project(t, "export const count: number = 'three';\n");
  const error = await compileService(outDir, tsconfig).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(error instanceof CompileError, 'the build fails with the compiler errors');
  if (!(error instanceof CompileError)) return;
  t.equal(error.typeErrors, 1, 'one type error counted');
  t.match(error.message, /checked\.ts\(1,14\): error TS2322/, 'the error is listed with its file and place');
  t.match(error.message, /the build failed: tsc exited with 1 type error/);
  t.same(await fs.readdir(outDir), ['previous.txt'], 'the previous output stays');
  t.same((await fs.readdir(dir)).sort(), ['checked.ts', 'dist', 'package.json', 'tsconfig.json'], 'no staging folder is left');
});

t.test('the same project without the error gets past the compiler', async (t) => {
  const { tsconfig, outDir } = await project(t, 'export const count: number = 3;\n');
  const error = await compileService(outDir, tsconfig).then(
    () => undefined,
    (e: unknown) => e,
  );
  // This one-file project has no app/main.js, so the build stops after tsc, at the check of its output.
  t.notOk(error instanceof CompileError, 'no compiler error');
  t.match(String(error), /app\/main\.js/, 'it stops only at the missing app/main.js');
});
