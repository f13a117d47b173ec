import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../fixtures/child.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { verifyWebhook, SIGNATURE_HEADER } from '../../client/src/webhooks.ts';
import { dockerfileCmd } from './dockerfile.ts';

/**
 * The production build as the image makes it: a copy of the repository (tracked files and the working
 * tree's others, without node_modules, .data or dist), deploy/container/build.sh run on it (the script the
 * Dockerfile's build stage runs: `npm ci`, the build, `npm prune --omit=dev`), and the service started from
 * the folder it fills, with the Dockerfile's own command, where no parent folder holds a node_modules: a
 * development dependency needed at run time fails here. Then a short flow over HTTP: sign-up, an API key,
 * a webhook endpoint on loopback, one generation to `succeeded`, its delivery verified; SIGTERM ends it with 0.
 *
 * On PostgreSQL and Redis when TEST_DATABASE_URL / TEST_REDIS_URL are set, PGlite otherwise. It takes one
 * to three minutes (mostly `npm ci`), so CI runs it in one of its two runs (.ci/run sets
 * SKIP_PRODUCTION_INSTALL in the other).
 */
const skip = process.env.SKIP_PRODUCTION_INSTALL ? 'SKIP_PRODUCTION_INSTALL is set (CI runs this test in its other run)' : false;
t.setTimeout(600_000);

/** Folders the image never takes from a checkout: installed, built or stored by a run. */
const LEFT_OUT = /^(?:node_modules|\.data|dist|dist\.tmp-[^/]*|\.tap|coverage|client\/dist|dashboard\/dist|test\/artifacts)(?:\/|$)|(?:^|\/)node_modules\//;

async function copyRepository(to: string): Promise<number> {
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  let copied = 0;
  for (const file of new Set(listed.stdout.split('\0').filter(Boolean))) {
    if (LEFT_OUT.test(file)) continue;
    const stat = await fs.lstat(path.join(ROOT, file)).catch(() => undefined);
    // A tracked file deleted in the working tree is not copied, as `COPY . .` would not find it either.
    if (!stat || stat.isDirectory()) continue;
    await fs.mkdir(path.dirname(path.join(to, file)), { recursive: true });
    await fs.cp(path.join(ROOT, file), path.join(to, file), { verbatimSymlinks: true, preserveTimestamps: true });
    copied++;
  }
  return copied;
}

function run(
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string> },
): Promise<{ code: number | null; output: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const proc = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout.on('data', (chunk) => {
      output += chunk;
    });
    proc.stderr.on('data', (chunk) => {
      output += chunk;
    });
    proc.on('close', (code) => resolve({ code, output, ms: Date.now() - started }));
  });
}

interface Delivery {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A webhook receiver on loopback that keeps every POST and answers 204. */
async function receiver(t: Test): Promise<{ url: string; deliveries: Delivery[]; next(): Promise<Delivery> }> {
  const deliveries: Delivery[] = [];
  const waiters: Array<(delivery: Delivery) => void> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req
      .on('data', (chunk: Buffer) => chunks.push(chunk))
      .on('end', () => {
        const delivery = { headers: req.headers, body: Buffer.concat(chunks) };
        deliveries.push(delivery);
        waiters.shift()?.(delivery);
        res.writeHead(204).end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    deliveries,
    next: () => (deliveries.length > 0 ? Promise.resolve(deliveries[0]!) : new Promise((resolve) => waiters.push(resolve))),
  };
}

t.test('the production build runs on its production dependencies alone', { skip }, async (t) => {
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-production-'));
  t.teardown(() => fs.rm(scratch, { recursive: true, force: true }));
  const source = path.join(scratch, 'src');
  const app = path.join(scratch, 'app');
  t.ok((await copyRepository(source)) > 100, 'the repository is copied');

  // Offline from npm's cache when it holds the lockfile's packages; the registry otherwise.
  const buildEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false' };
  const build = await run('bash', ['deploy/container/build.sh', app], { cwd: source, env: buildEnv });
  t.comment(`deploy/container/build.sh: ${build.ms} ms`);
  t.equal(build.code, 0, `the build script succeeds${build.code === 0 ? '' : `\n${build.output.slice(-8000)}`}`);
  if (build.code !== 0) return;

  // Every package the lockfile marks as wanted by development alone is gone (some devDependencies, such as yaml, a production package also needs).
  const lock = JSON.parse(await fs.readFile(path.join(app, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const devOnly = Object.entries(lock.packages)
    .filter(([where, entry]) => entry.dev && where.startsWith('node_modules/'))
    .map(([where]) => where);
  const present = (
    await Promise.all(
      devOnly.map(
        async (where) =>
          await fs.stat(path.join(app, where)).then(
            () => where,
            () => undefined,
          ),
      ),
    )
  ).filter(Boolean);
  t.ok(devOnly.length > 100, `the lockfile names the development packages (${devOnly.length})`);
  t.same(present, [], 'none of them is in the production node_modules');
  const installed = new Set(await fs.readdir(path.join(app, 'node_modules')));
  for (const dev of ['tsx', 'esbuild', 'typescript', 'tap']) t.notOk(installed.has(dev), `no ${dev}`);
  for (const needed of ['pg', 'uWebSockets.js', '@electric-sql', '@ffmpeg-installer']) t.ok(installed.has(needed), `${needed} is there`);
  t.same((await fs.readdir(app)).sort(), ['dist', 'node_modules', 'package-lock.json', 'package.json'], 'the run layout holds only what runs');
  // What no run loads is gone (deploy/container/prune.sh), and the whole fits the size docs/build.md gives.
  const uwsBinaries = await fs.readdir(path.join(app, 'node_modules/uWebSockets.js/binaries'));
  t.same(uwsBinaries, [`uws_${process.platform}_${process.arch}_${process.versions.modules}.node`], "uWebSockets.js: this Node's addon alone");
  const files = (await fs.readdir(path.join(app, 'node_modules'), { recursive: true })) as string[];
  t.same(
    files.filter((file) => /\.(?:map|ts|mts|cts)$/.test(file)),
    [],
    'no source maps, no TypeScript',
  );
  const bytes = (
    await Promise.all(files.map((file) => path.join(app, 'node_modules', file)).map((file) => fs.lstat(file).then((s) => (s.isFile() ? s.size : 0))))
  ).reduce((a, b) => a + b, 0);
  let distBytes = 0;
  for (const file of (await fs.readdir(path.join(app, 'dist'), { recursive: true })) as string[]) {
    const stat = await fs.lstat(path.join(app, 'dist', file));
    if (stat.isFile()) distBytes += stat.size;
  }
  const megabytes = (bytes + distBytes) / 1e6;
  t.comment(`production build: ${megabytes.toFixed(1)} MB of files (node_modules and dist)`);
  t.ok(megabytes <= 150, `the production build is at most 150 MB (${megabytes.toFixed(1)} MB)`);

  const pkg = JSON.parse(await fs.readFile(path.join(app, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  t.equal(
    pkg.scripts.start,
    'exec node --max-semi-space-size=32 dist/app/main.js',
    'npm start runs the compiled service (with 32 MiB semi-spaces, as the image)',
  );

  const postgres = process.env.TEST_DATABASE_URL ? await freshDatabaseUrl() : undefined;
  t.teardown(() => postgres?.drop());
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    // The image's settings, on loopback: a production service that may deliver to this test's receiver.
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: '0',
    DATA_DIR: path.join(scratch, 'data'),
    LOOPBACK_EGRESS: 'true',
    LOG_LEVEL: 'warn',
    LOCAL_PROVIDER_LATENCY_MS: '50',
    ...(postgres ? { DATABASE_URL: postgres.url } : {}),
    ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `test:${randomBytes(6).toString('hex')}:` } : {}),
  };
  // The migrate-only mode from the build, as the Kubernetes init container runs it, before the service.
  const migrate = await run('npm', ['run', '--silent', 'migrate'], { cwd: app, env });
  t.equal(migrate.code, 0, `npm run migrate works from the production build\n${migrate.output.slice(-2000)}`);
  t.match(migrate.output, /"missing":\[/, 'and says what the database lacked');

  const [command, ...args] = await dockerfileCmd();
  const service = spawn(command === 'node' ? process.execPath : command!, args, { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (service.exitCode === null) service.kill('SIGKILL');
  });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => service.on('close', (code) => resolve(code)));
  service.stdout.resume();
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not listening within 60 s:\n${stderr}`)), 60_000);
    service.stderr.on('data', (chunk) => {
      stderr += chunk;
      const found = /listening on (http:\/\/\S+)/.exec(stderr);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]!);
      }
    });
    exited.then((code) => reject(new Error(`the service exited (${code}) before listening:\n${stderr}`)));
  });
  let ready = 0;
  for (let i = 0; i < 600 && ready !== 200; i++) {
    ready = (await fetch(`${url}/health/ready`).catch(() => undefined))?.status ?? 0;
    if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.equal(ready, 200, 'ready');
  t.equal((await fetch(`${url}/`)).status, 200, 'the dashboard is served from the compiled output');

  const json = async (method: string, route: string, headers: Record<string, string>, body?: unknown) => {
    const answer = await fetch(`${url}${route}`, {
      method,
      headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: answer.status, headers: answer.headers, body: (await answer.json()) as any };
  };
  const signup = await json('POST', '/v1/auth/signup', {}, { email: 'ops@example.com', password: 'a-long-password', name: 'Ops' });
  t.equal(signup.status, 201, 'signed up');
  const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0]!;
  const workspaces = await json('GET', '/v1/workspaces', { cookie });
  const workspaceId = workspaces.body.data[0].id as string;
  const key = await json('POST', '/v1/api-keys', { cookie }, { workspaceId, name: 'production-install', scopes: ['all'] });
  t.equal(key.status, 201, 'an API key');
  const auth = { authorization: `Bearer ${key.body.key}` };

  const hooks = await receiver(t);
  const endpoint = await json('POST', '/v1/webhooks', auth, { workspaceId, url: hooks.url, eventTypes: ['generation.completed'] });
  t.equal(endpoint.status, 201, 'a webhook endpoint on loopback');

  const created = await json('POST', '/v1/generations', auth, { workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'hello' } });
  t.equal(created.status, 201, 'a generation');
  let status = created.body.status as string;
  for (let i = 0; i < 300 && !['succeeded', 'failed', 'cancelled', 'expired'].includes(status); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    status = (await json('GET', `/v1/generations/${created.body.id}?workspaceId=${workspaceId}`, auth)).body.status;
  }
  t.equal(status, 'succeeded', 'it succeeds');

  const delivery = await Promise.race([hooks.next(), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 30_000))]);
  t.ok(delivery, 'its webhook is delivered');
  if (delivery) {
    const event = verifyWebhook(delivery.body, delivery.headers[SIGNATURE_HEADER], endpoint.body.secret);
    t.equal(event.event, 'generation.completed', "signed with the endpoint's secret");
    t.equal((event.data as { generationId?: string }).generationId, created.body.id, 'about that generation');
  }

  // The operator's command from the production build (dist/app/ops.js: no tsx there): the switch, and a reload by SIGHUP.
  const opsStatus = await run('npm', ['run', '--silent', 'ops', '--', 'status'], { cwd: app, env });
  t.equal(opsStatus.code, 0, `npm run ops -- status works from the production build\n${opsStatus.output.slice(-2000)}`);
  t.match(opsStatus.output, /"paused":false/);
  const reload = await run('npm', ['run', '--silent', 'ops', '--', 'reload'], { cwd: app, env });
  t.equal(reload.code, 0, `npm run ops -- reload works from the production build\n${reload.output.slice(-2000)}`);
  const served = ((await (await fetch(`${url}/health/ready`)).json()) as { catalog: { version: string } }).catalog.version;
  t.match(
    JSON.parse(reload.output.split('\n').find((line) => line.startsWith('{'))!),
    { pid: service.pid, outcome: 'unchanged', version: served },
    'it signalled the service (its pid from the pid file), which read its catalog again',
  );

  service.kill('SIGTERM');
  t.equal(await exited, 0, `SIGTERM stops it cleanly${stderr.includes('fatal') ? `\n${stderr}` : ''}`);

  // Under `npm start` the process to signal is Node, npm's child: the pid file names it, and a reload leaves npm running.
  const npmStart = spawn('npm', ['start'], { cwd: app, env, stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => {
    if (npmStart.exitCode === null) npmStart.kill('SIGKILL');
  });
  let npmStderr = '';
  const npmExited = new Promise<number | null>((resolve) => npmStart.on('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start: not listening within 60 s:\n${npmStderr}`)), 60_000);
    npmStart.stderr.on('data', (chunk) => {
      npmStderr += chunk;
      if (/listening on http/.test(npmStderr)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const pidFile = path.join(env.DATA_DIR!, 'run', 'service.pid');
  const nodePid = Number((await fs.readFile(pidFile, 'utf8')).trim());
  t.not(nodePid, npmStart.pid, 'the pid file names Node, not npm');
  const npmReload = await run('npm', ['run', '--silent', 'ops', '--', 'reload'], { cwd: app, env });
  t.equal(npmReload.code, 0, npmReload.output.slice(-2000));
  t.match(JSON.parse(npmReload.output.split('\n').find((line) => line.startsWith('{'))!), { pid: nodePid, outcome: 'unchanged' }, 'Node answered the reload');
  t.equal(npmStart.exitCode, null, 'and npm start still runs');
  npmStart.kill('SIGTERM');
  t.equal(await npmExited, 0, 'SIGTERM to npm stops the service cleanly');
  await t.rejects(fs.access(pidFile), 'and its pid file is removed');
});
