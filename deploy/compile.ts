import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Compiles the service into dist/ (`npm run build`, after the dashboard): tsc with tsconfig.build.json,
 * then the files the compiled code reads beside itself, at the same relative places as in the source tree:
 *
 * - dist/package.json: app/wiring/start-settings.ts reads its version from `../../package.json`; it also keeps dist/ an ES module scope;
 * - dist/dashboard/dist: http/dashboard.ts serves `../dashboard/dist` (built by dashboard/build.ts just before);
 * - dist/catalog: the shipped catalog, which runtime/config.ts looks for at `../catalog/default.yaml`.
 *
 * A type error fails the build, listed, and nothing is emitted (tsconfig.build.json's noEmitOnError): code that
 * does not type-check is not shipped. Built beside the old output, then swapped in, so a service running from
 * dist/ never sees half a build, and a failed build leaves the old one.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DIST = path.join(ROOT, 'dist');
/** Folders of data files the service reads at run time, copied as they are. */
const RUNTIME_FOLDERS = ['catalog'];

/** tsc reported errors: the build stops, its output is not swapped in. */
export class CompileError extends Error {
  constructor(
    readonly typeErrors: number,
    readonly output: string,
  ) {
    super(`${output.trimEnd()}\nthe build failed: tsc exited with ${typeErrors} type error(s); nothing was emitted`);
    this.name = 'CompileError';
  }
}

/** `project`: the tsconfig compiled (the service's tsconfig.build.json; a test gives its own). */
export async function compileService(outDir = DIST, project = path.join(ROOT, 'tsconfig.build.json')): Promise<void> {
  const staging = `${outDir}.tmp-${process.pid}`;
  await fs.rm(staging, { recursive: true, force: true });
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', project, '--outDir', staging, '--pretty', 'false'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  // tsc's exit status: 0 clean; anything else is an error (with noEmitOnError, 1: errors and nothing emitted).
  if (run.status !== 0) {
    await fs.rm(staging, { recursive: true, force: true });
    throw new CompileError((run.stdout.match(/error TS\d+/g) ?? []).length, `${run.stdout}${run.stderr}${run.signal ? `tsc ended by ${run.signal}\n` : ''}`);
  }
  await fs.access(path.join(staging, 'app', 'main.js'));

  const pkg = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  await fs.writeFile(
    path.join(staging, 'package.json'),
    `${JSON.stringify({ name: pkg.name, version: pkg.version, private: true, type: 'module' }, null, 2)}\n`,
  );
  const dashboard = path.join(ROOT, 'dashboard', 'dist');
  await fs.access(path.join(dashboard, 'index.html')).catch(() => {
    throw new Error('dashboard/dist/index.html is missing: run npm run build:dashboard first');
  });
  await fs.cp(dashboard, path.join(staging, 'dashboard', 'dist'), { recursive: true });
  for (const folder of RUNTIME_FOLDERS) {
    if (await fs.stat(path.join(ROOT, folder)).catch(() => undefined)) await fs.cp(path.join(ROOT, folder), path.join(staging, folder), { recursive: true });
  }

  await fs.rm(outDir, { recursive: true, force: true });
  await fs.rename(staging, outDir);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  try {
    await compileService();
    console.log(`service compiled into dist/ in ${Date.now() - started} ms (npm start runs dist/app/main.js)`);
  } catch (error) {
    if (!(error instanceof CompileError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exitCode = 1;
  }
}
