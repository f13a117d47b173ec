import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, startNode } from '../fixtures/child.ts';
import { durableStorage } from '../helpers/database.ts';
import { plan, servedVersion, textModel, until } from '../catalog/support.ts';
import { servicePaths } from '../../runtime/service-pid.ts';

/**
 * `npm run ops -- reload` against the service as `npm start` runs it (app/main.ts in its own process): the
 * command finds the process through the pid file under DATA_DIR, sends it SIGHUP and prints the outcome the
 * service answers: applied, unchanged, refused (exit 65), and unchanged with the old problems for the same
 * bad file. The catalog is reached through a symbolic link whose folder never changes and the poll is an hour
 * apart, so only the signal reloads it. The production build's own run is in test/deploy/production-install.test.ts.
 */
const catalog = (credits: number) => ({
  defaultPlan: 'basic',
  plans: [plan('basic')],
  models: [textModel('acme/writer', { per: 'job', credits }, ['basic'])],
});

function ops(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '--silent', 'ops', '--', ...args],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

t.test('npm run ops -- reload signals the running service and prints its outcome', async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-ops-reload-');
  const real = path.join(dataDir, 'catalog-real');
  const linked = path.join(dataDir, 'catalog-link');
  mkdirSync(real);
  mkdirSync(linked);
  writeFileSync(path.join(real, 'catalog.json'), JSON.stringify(catalog(2)));
  symlinkSync(path.join(real, 'catalog.json'), path.join(linked, 'catalog.json'));
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    CATALOG_FILE: path.join(linked, 'catalog.json'),
    CATALOG_POLL_MS: '3600000',
    ...(postgres ? { DATABASE_URL: postgres.url } : {}),
  };

  const none = await ops(['reload'], env);
  t.equal(none.code, 1, 'no service running: exit 1');
  t.match(none.stderr, /no running service found through .*service\.pid/, 'saying where it looked');

  const child = startNode(t, 'app/main.ts', { ...env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn' });
  const url = await until('listening', () => /listening on (http:\/\/\S+)/.exec(child.stderr())?.[1], 60_000, 50);
  const paths = servicePaths(dataDir);
  t.equal(readFileSync(paths.pid, 'utf8').trim(), String(child.proc.pid), "the pid file names the service's process");
  t.match(child.stderr(), /npm run ops -- reload/, 'the start banner says how to reload');
  const v1 = await until('ready', () => servedVersion(url), 60_000, 50);

  const same = await ops(['reload'], env);
  t.equal(same.code, 0, same.stderr);
  t.same(JSON.parse(same.stdout), { pid: child.proc.pid, outcome: 'unchanged', version: v1 }, 'the same file: unchanged');

  writeFileSync(path.join(real, 'catalog.json'), JSON.stringify(catalog(7)));
  const applied = await ops(['reload'], env);
  t.equal(applied.code, 0, applied.stderr);
  const answer = JSON.parse(applied.stdout) as { outcome: string; version: string };
  t.equal(answer.outcome, 'applied', 'a new file: applied');
  t.not(answer.version, v1, 'a new version');
  t.equal(await servedVersion(url), answer.version, 'the version the service now serves');

  writeFileSync(path.join(real, 'catalog.json'), '{ "defaultPlan": "basic", "plans": [');
  const refused = await ops(['reload'], env);
  t.equal(refused.code, 65, 'a refused file: exit 65');
  t.equal(JSON.parse(refused.stdout).outcome, 'refused');
  t.match(refused.stderr, /refused the catalog file and still serves/);
  const again = await ops(['reload'], env);
  t.equal(again.code, 65, 'the same refused file again: exit 65');
  t.match(
    JSON.parse(again.stdout),
    { outcome: 'unchanged', version: answer.version, problems: [/not valid JSON/] },
    'unchanged, with the problems it still has',
  );
  t.equal(await servedVersion(url), answer.version, 'the catalog served stays');

  child.proc.kill('SIGTERM');
  t.equal((await child.exited).code, 0, 'stops cleanly');
  t.notOk(existsSync(paths.pid), 'and removes its pid file');
});

t.test('a stale pid file naming another program: nothing is signalled', async (t) => {
  const { dataDir } = await durableStorage(t, 'gs-ops-stale-');
  // A program that SIGHUP would end, under the pid a killed service left behind.
  const other = spawn('sleep', ['60'], { stdio: 'ignore' });
  t.teardown(() => {
    other.kill('SIGKILL');
  });
  const paths = servicePaths(dataDir);
  mkdirSync(paths.dir, { recursive: true });
  writeFileSync(paths.pid, `${other.pid}\n`);
  const answer = await ops(['reload'], { DATA_DIR: dataDir });
  t.equal(answer.code, 1, 'exit 1');
  t.match(answer.stderr, /no running service found/, 'no service found');
  t.equal(other.exitCode, null, 'the other program still runs');
  t.equal(other.signalCode, null, 'and got no signal');
});
