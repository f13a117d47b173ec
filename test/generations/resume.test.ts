import { spawn } from 'node:child_process';
import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { DEFAULT_SWITCH_POLL_MS } from '../../runtime/switches.ts';
import { newId } from '../../persistence/ids.ts';
import { startTestServer } from '../helpers/server.ts';
import { durableStorage } from '../helpers/database.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { CHILD_NODE_FLAGS, ROOT } from '../fixtures/child.ts';
import { generationRow, insertGenerations } from './support.ts';
import { cancelGeneration, createGeneration, getGeneration, moneyOf, serverQuery, waitFor } from './flow.ts';
import { cameTrue } from '../helpers/eventually.ts';

/** `npm run ops -- <args>` as a child process, moving the server's clock meanwhile so its poll (and mailbox) runs. */
async function ops(clock: ManualClock, args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...CHILD_NODE_FLAGS, '--import', './test/loader/register.mjs', 'app/ops.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  let ended = false;
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const done = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.on('close', (code) => {
      ended = true;
      resolve({ code, stderr });
    }),
  );
  // Moves the server's clock while the command runs; past the bound, the command's end is awaited as it is.
  await cameTrue(
    () => {
      if (ended) return true;
      clock.advance(DEFAULT_SWITCH_POLL_MS);
      return false;
    },
    Date.now() + 60_000,
    50,
  );
  return done;
}

t.test('releasing the emergency stop with the ops command starts queued jobs without a new request', async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-resume-');
  const opsEnv: Record<string, string> = postgres ? { DATABASE_URL: postgres.url } : { DATA_DIR: dataDir };
  const clock = new ManualClock(Date.now());
  // Ten minutes of provider latency on the manual clock: started jobs stay in flight.
  const server = await startTestServer(t, {
    clock,
    databaseUrl: postgres?.url ?? '',
    env: { DATA_DIR: dataDir, LOCAL_PROVIDER_LATENCY_MS: '600000', RATE_LIMIT_FREE: '100000', ...(postgres ? {} : { DATABASE_URL: '' }) },
  });
  const query = serverQuery(server);

  // A live workspace actor: two jobs in flight (the free plan's concurrency) and one queued behind them.
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `job ${i}` } });
    t.equal(created.status, 201);
    ids.push(created.body.id);
  }
  for (const id of ids.slice(0, 2)) await waitFor(server, key, user.workspaceId, id, (g) => g.status === 'submitted', 'submitted');

  // A workspace whose actor is not running, with a queued job in the database (and its credit reserved).
  const idle = await signUp(server);
  const { key: idleKey } = await createKey(server, idle.cookie, idle.workspaceId, ['generations.read']);
  const now = new Date(clock.now());
  const [row] = await insertGenerations(server, [
    generationRow(idle.workspaceId, {
      createdAt: now,
      updatedAt: now,
      queueDeadline: new Date(clock.now() + 3_600_000),
      timeline: [{ status: 'queued', at: now.toISOString() }],
    }),
  ]);
  const em = server.services.db.em();
  await em.execute(
    `insert into workspace_accounts (workspace_id, available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, updated_at)
    values (?, 99, 1, 0, 0, false, ?)`,
    [idle.workspaceId, now],
  );
  for (const [kind, credits, reserved] of [
    ['grant', 100, 0],
    ['reserve', -1, 1],
  ] as const) {
    await em.execute(
      `insert into credit_ledger (id, workspace_id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference, created_at)
      values (?, ?, ?, ?, ?, 0, 0, ?, null, ?)`,
      [newId('txn', now.getTime()), idle.workspaceId, kind, credits, reserved, kind === 'reserve' ? row!.id : null, now],
    );
  }

  await server.services.switches.setGenerationPaused(true, 'provider outage');
  const cancelled = await cancelGeneration(server, key, user.workspaceId, ids[0]!);
  t.equal(cancelled.body.status, 'cancelled');
  await server.services.actors.drain();
  t.equal((await getGeneration(server, key, user.workspaceId, ids[2]!)).status, 'queued', 'paused: the freed slot is not used');
  t.notOk(server.services.actors.isLive('ws', idle.workspaceId), "the other workspace's actor is not running");

  const resumed = await ops(clock, ['resume'], opsEnv);
  t.equal(resumed.code, 0, resumed.stderr);
  // On Postgres the command wrote the row itself: the server sees it at its next poll.
  await cameTrue(
    () => {
      if (!server.services.switches.generationPaused().paused) return true;
      clock.advance(DEFAULT_SWITCH_POLL_MS);
      return false;
    },
    Date.now() + 20_000,
    20,
  );
  t.equal(server.services.switches.generationPaused().paused, false, 'the server took the resume');

  // No request is made to either workspace's create endpoint from here on.
  const started = await waitFor(server, key, user.workspaceId, ids[2]!, (g) => g.status === 'submitted', 'submitted');
  t.same(
    started.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted'],
    'the queued job of a live workspace started',
  );
  const other = await waitFor(server, idleKey, idle.workspaceId, row!.id, (g) => g.status === 'submitted', 'submitted');
  t.same(
    other.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted'],
    'the queued job of a workspace with no live actor started too',
  );
  t.same(
    await moneyOf(query, idle.workspaceId),
    { available: 99, reserved: 1, ledgerAvailable: 99, ledgerReserved: 1, reservations: [row!.id] },
    'still reserved once',
  );
});
