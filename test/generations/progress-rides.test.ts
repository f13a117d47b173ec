import t, { type Test } from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, serverQuery, TERMINAL } from './flow.ts';
import { directStatements, type DirectStatement } from '../../persistence/direct-transaction.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * A job of a provider that answers within its request and keeps nothing to look up (the local provider here,
 * OpenAI too) has submitted and running that protect nothing a restart could use: they ride with the job's
 * next write (actors/generation/actor.ts, RIDE_MS) instead of costing commits of their own.
 */

function recordTransactions(t: Test): { seen: DirectStatement[]; stop(): void } {
  const seen: DirectStatement[] = [];
  const listener = (message: unknown) => {
    seen.push(message as DirectStatement);
  };
  directStatements.subscribe(listener);
  const stop = () => directStatements.unsubscribe(listener);
  t.teardown(stop);
  return { seen, stop };
}

interface Row {
  status: string;
  timeline: Array<{ status: string }>;
  started_at: Date | null;
  provider_job_id: string | null;
}

t.test('a quick job is written twice: its create, then its settlement carrying its submitted and running', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const account = await signUp(server);
  const { key } = await createKey(server, account.cookie, account.workspaceId, ['generations.write', 'generations.read']);
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'ride along' } };
  const query = serverQuery(server);
  const finished = async (id: string) => {
    for (;;) {
      const [row] = await query<Row>('select status, timeline, started_at, provider_job_id from generations where id = ?', [id]);
      if (row && TERMINAL.includes(row.status)) return row;
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  // The workspace's actor loaded first, by a job run to its end.
  const first = await createGeneration(server, key, account.workspaceId, body);
  t.equal((await finished(first.body.id)).status, 'succeeded');

  for (let i = 0; i < 5; i++) {
    const recorded = recordTransactions(t);
    const created = await createGeneration(server, key, account.workspaceId, body);
    t.equal(created.status, 201);
    const row = await finished(created.body.id);
    recorded.stop();
    t.equal(row.status, 'succeeded');
    t.same(
      row.timeline.map((e) => e.status),
      ['queued', 'reserved', 'submitted', 'running', 'succeeded'],
      'its timeline has every transition',
    );
    t.ok(row.started_at, 'its start is written');
    t.match(row.provider_job_id, /^local_/, 'and its provider job id');

    const byTx = new Map<number, string[]>();
    for (const s of recorded.seen) byTx.set(s.transaction, [...(byTx.get(s.transaction) ?? []), s.sql.trim().replace(/\s+/g, ' ')]);
    const txs = [...byTx.values()];
    const progress = /^update generations g set status = v\.status, timeline = v\.timeline/;
    const settlement = /^update generations g set status = v\.status, completed_at/;
    const settling = txs.filter((sqls) => sqls.some((sql) => settlement.test(sql)));
    t.equal(settling.length, 1, 'one settlement');
    t.same(
      txs.filter((sqls) => sqls.some((sql) => progress.test(sql)) && !sqls.some((sql) => settlement.test(sql))),
      [],
      'no transaction of its own for submitted or running',
    );
    const inSettlement = settling[0] ?? [];
    const at = inSettlement.findIndex((sql) => progress.test(sql));
    t.ok(at >= 0 && at < inSettlement.findIndex((sql) => settlement.test(sql)), 'its progress is written in the settlement, before it');
    t.equal(txs.length, 2, `two write transactions in all: ${JSON.stringify(txs.map((sqls) => sqls.map((s) => s.slice(0, 40))))}`);
  }
});

t.test('a job still running after RIDE_MS is written as running before it ends', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '4000' } });
  const account = await signUp(server);
  const { key } = await createKey(server, account.cookie, account.workspaceId, ['generations.write', 'generations.read']);
  const query = serverQuery(server);
  const created = await createGeneration(server, key, account.workspaceId, {
    mode: 'text_to_text',
    model: 'local/text-mini',
    params: { prompt: 'a long one' },
  });
  t.equal(created.status, 201);
  // Unbounded before: the bound is the file's timeout.
  const row: Row | undefined = await eventually(
    async () => {
      const [found] = await query<Row>('select status, timeline, started_at, provider_job_id from generations where id = ?', [created.body.id]);
      return found && (found.status === 'running' || TERMINAL.includes(found.status)) && found;
    },
    { timeoutMs: 180_000, everyMs: 20, what: 'the job running' },
  );
  t.equal(row?.status, 'running', 'stored as running while it runs');
  t.same(
    row?.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted', 'running'],
  );
  t.ok(row?.started_at, 'with its start');
  t.match(row?.provider_job_id, /^local_/, 'and its provider job id');
});
