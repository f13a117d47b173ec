import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { DEFAULT_SWITCH_POLL_MS } from '../../runtime/switches.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { CHILD_NODE_FLAGS, ROOT } from '../fixtures/child.ts';
import { get } from './support.ts';
import { cameTrue, eventually, NotMetError } from '../helpers/eventually.ts';

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `npm run ops -- …` as a child process (node --import tsx app/ops.ts …) with exactly this environment. */
function ops(args: string[], env: Record<string, string>): { done: Promise<Ran>; finished: () => boolean } {
  const child = spawn(process.execPath, [...CHILD_NODE_FLAGS, '--import', './test/loader/register.mjs', 'app/ops.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let ended = false;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const done = new Promise<Ran>((resolve) =>
    child.on('close', (code) => {
      ended = true;
      resolve({ code, stdout, stderr });
    }),
  );
  return { done, finished: () => ended };
}

/** Runs the command line while moving the server's clock, so the server's poll (and its mailbox) runs. */
async function opsWhilePolling(clock: ManualClock, args: string[], env: Record<string, string>): Promise<Ran> {
  const run = ops(args, env);
  // Past the bound, the command's end is awaited as it is.
  await cameTrue(
    () => {
      if (run.finished()) return true;
      clock.advance(DEFAULT_SWITCH_POLL_MS);
      return false;
    },
    Date.now() + 60_000,
    50,
  );
  return run.done;
}

/** The state GET /v1/generations/emergency-stop reports, once the server's refresh has run. */
async function settled(server: TestServer, key: string, paused: boolean) {
  const state = () => get(server, '/v1/generations/emergency-stop', key);
  // Past the bound, the state as it is (for the caller's assertion to show).
  return eventually(
    async () => {
      const res = await state();
      return res.body?.paused === paused && res;
    },
    { timeoutMs: 10_000, everyMs: 20 },
  ).catch((error) => {
    if (error instanceof NotMetError) return state();
    throw error;
  });
}

function stateOf(ran: Ran) {
  return JSON.parse(ran.stdout.trim().split('\n').pop() ?? 'null');
}

t.test('GET /v1/generations/emergency-stop: any valid key or session, no workspace needed', async (t) => {
  const server = await startTestServer(t);
  const owner = await signUp(server);
  const narrow = await createKey(server, owner.cookie, owner.workspaceId, ['files.write']);
  for (const credential of [narrow.key, owner.cookie]) {
    const res = await get(server, '/v1/generations/emergency-stop', credential);
    t.equal(res.status, 200);
    t.same(res.body, { paused: false, reason: null, since: null });
    t.equal(res.headers.get('cache-control'), 'no-store');
  }
  const anonymous = await get(server, '/v1/generations/emergency-stop');
  t.equal(anonymous.status, 401);
  t.equal(anonymous.body.error.code, 'unauthenticated');
  const revoked = await createKey(server, owner.cookie, owner.workspaceId, ['all']);
  await server.json(`/v1/api-keys/${revoked.id}`, { method: 'DELETE', headers: { cookie: owner.cookie } });
  t.equal((await get(server, '/v1/generations/emergency-stop', revoked.key)).status, 401, 'a revoked key');
  t.equal((await get(server, `/v1/generations/emergency-stop`, `gs_live_${'y'.repeat(64)}`)).status, 401, 'an unknown key');

  const since = new Date(server.services.clock.now());
  await server.services.switches.setGenerationPaused(true, 'provider outage');
  const paused = await get(server, '/v1/generations/emergency-stop', narrow.key);
  t.equal(paused.body.paused, true);
  t.equal(paused.body.reason, 'provider outage');
  t.ok(Date.parse(paused.body.since) >= since.getTime() - 1000, 'since is when the pause began');
  await server.services.switches.setGenerationPaused(true, 'still out');
  const again = await get(server, '/v1/generations/emergency-stop', narrow.key);
  t.same(again.body, { paused: true, reason: 'still out', since: paused.body.since }, 'pausing again keeps since, takes the new reason');
  await server.services.switches.setGenerationPaused(false);
  t.same((await get(server, '/v1/generations/emergency-stop', narrow.key)).body, { paused: false, reason: null, since: null });
});

t.test('the ops command line on a PGlite data directory reaches the running server through its mailbox', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-ops-'));
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const env = { DATA_DIR: dataDir };
  const clock = new ManualClock(Date.UTC(2026, 4, 1, 8, 0, 0));
  // DATABASE_URL empty: PGlite on disk under DATA_DIR, as `npm start` uses by default.
  let server = await startTestServer(t, { clock, env: { DATABASE_URL: '', DATA_DIR: dataDir } });
  t.equal(server.services.db.kind, 'pglite');
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['generations.read']);
  t.equal((await fs.readFile(path.join(dataDir, 'ops', 'server.pid'), 'utf8')).trim(), String(process.pid), 'the server claims the directory');

  const pause = await opsWhilePolling(clock, ['pause', 'provider', 'outage'], env);
  t.equal(pause.code, 0, `pause exits 0: ${pause.stderr}`);
  const pausedState = stateOf(pause);
  t.match(pausedState, { paused: true, reason: 'provider outage' });
  t.match(pause.stderr, /PAUSED/);
  const seen = await settled(server, key.key, true);
  t.same(seen.body, pausedState, 'GET reflects the switch');
  t.equal(
    Date.parse(seen.body.since) <= clock.now() && Date.parse(seen.body.since) >= Date.UTC(2026, 4, 1, 8, 0, 0),
    true,
    "since comes from the server's clock",
  );

  const status = await opsWhilePolling(clock, ['status'], env);
  t.equal(status.code, 0);
  t.same(stateOf(status), pausedState, 'status reads the stored switch');

  // Stop the server: the command line then opens the data directory itself.
  await server.stop();
  t.notOk(await fs.stat(path.join(dataDir, 'ops', 'server.pid')).catch(() => false), 'a stopped server lets go of it');
  const direct = ops(['status'], env);
  const offline = await direct.done;
  t.equal(offline.code, 0, `status without a server: ${offline.stderr}`);
  t.same(stateOf(offline), pausedState, 'the switch is stored in the database, not in the server');

  server = await startTestServer(t, { clock, env: { DATABASE_URL: '', DATA_DIR: dataDir } });
  t.same((await get(server, '/v1/generations/emergency-stop', key.key)).body, pausedState, 'a restarted server starts paused');

  const resume = await opsWhilePolling(clock, ['resume'], env);
  t.equal(resume.code, 0, resume.stderr);
  t.same(stateOf(resume), { paused: false, reason: null, since: null });
  t.same((await settled(server, key.key, false)).body, { paused: false, reason: null, since: null });
  t.same(await fs.readdir(path.join(dataDir, 'ops', 'requests')), [], 'the mailbox is empty');
});

t.test(
  'the ops command line on Postgres writes the row; every server picks it up at its next poll',
  { skip: process.env.TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' },
  async (t) => {
    const database = await freshDatabaseUrl();
    t.teardown(() => database.drop());
    const clock = new ManualClock(Date.UTC(2026, 4, 1, 8, 0, 0));
    const server = await startTestServer(t, { clock, databaseUrl: database.url });
    const owner = await signUp(server);
    const key = await createKey(server, owner.cookie, owner.workspaceId, ['generations.read']);
    const env = { DATABASE_URL: database.url };

    const pause = await ops(['pause', 'maintenance window'], env).done;
    t.equal(pause.code, 0, pause.stderr);
    t.match(stateOf(pause), { paused: true, reason: 'maintenance window' });
    t.same((await get(server, '/v1/generations/emergency-stop', key.key)).body.paused, false, 'not before the server polls');
    clock.advance(DEFAULT_SWITCH_POLL_MS);
    const seen = await settled(server, key.key, true);
    t.same(seen.body, stateOf(pause), 'after its poll interval the server reports it');

    const resume = await ops(['resume'], env).done;
    t.equal(resume.code, 0, resume.stderr);
    clock.advance(DEFAULT_SWITCH_POLL_MS);
    t.same((await settled(server, key.key, false)).body, { paused: false, reason: null, since: null });
  },
);

t.test('the ops command line refuses bad usage and a private in-memory database', async (t) => {
  const cases: Array<[string[], Record<string, string>, number, RegExp]> = [
    [[], {}, 64, /a command is required/],
    [['pause'], {}, 64, /pause needs a reason/],
    [['resume', 'now'], {}, 64, /takes no arguments/],
    [['explode'], {}, 64, /unknown command/],
    [['status'], { DATABASE_URL: 'memory://' }, 1, /private in-process database/],
    [['status'], { DATABASE_URL: 'mysql://x' }, 78, /DATABASE_URL/],
  ];
  for (const [args, env, code, message] of cases) {
    const ran = await ops(args, env).done;
    t.equal(ran.code, code, `${args.join(' ') || '(nothing)'}: exit ${code}`);
    t.match(ran.stderr, message);
    t.equal(ran.stdout, '', 'nothing on stdout');
  }
});
