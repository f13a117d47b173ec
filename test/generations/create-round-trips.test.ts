import t, { type Test } from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, serverQuery, TERMINAL } from './flow.ts';
import { recordDriverWrites } from '../helpers/driver-writes.ts';
import { directStatements, type DirectStatement } from '../../persistence/direct-transaction.ts';

/**
 * The statements of the service's write transactions (direct transactions: creates, progress, settlements),
 * each with its transaction's number, as they are sent; until the end of `t` or `stop()`.
 */
function recordTransactions(t: Test): { seen: DirectStatement[]; stop(): void } {
  const seen: DirectStatement[] = [];
  const listener = (message: unknown) => {
    seen.push(message as DirectStatement);
  };
  directStatements.subscribe(listener);
  const stop = () => {
    directStatements.unsubscribe(listener);
  };
  t.teardown(stop);
  return { seen, stop };
}

/** The terminal status of a job, once it has one (read from the database every `pollMs`). */
function endOf(query: ReturnType<typeof serverQuery>, pollMs: number) {
  return async (id: string): Promise<string> => {
    for (;;) {
      const [row] = await query<{ status: string }>('select status from generations where id = ?', [id]);
      if (row && TERMINAL.includes(row.status)) return row.status;
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  };
}

/**
 * A create is one statement besides BEGIN and COMMIT: its generation row, its usage rollup and its credit
 * reservation go in one statement, which also reads the transaction's id (no check statement after it).
 * Counted with the statements the write transactions send, grouped by transaction.
 */
t.test('a durable create commits in BEGIN, one statement, COMMIT, and a job with a free slot is reserved in it', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const account = await signUp(server);
  const { key } = await createKey(server, account.cookie, account.workspaceId, ['generations.write', 'generations.read']);
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'count my statements' } };
  const query = serverQuery(server);
  const finished = async (id: string) => {
    for (;;) {
      const [row] = await query<{ status: string }>('select status from generations where id = ?', [id]);
      if (row && TERMINAL.includes(row.status)) {
        t.equal(row.status, 'succeeded', `job ${id} succeeded`);
        return;
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  // A first job loads the workspace's actor (its reads are not the create's) and runs to its end.
  const first = await createGeneration(server, key, account.workspaceId, body);
  t.equal(first.status, 201);
  await finished(first.body.id);

  const recorded = recordTransactions(t);
  const created = await createGeneration(server, key, account.workspaceId, body);
  t.equal(created.status, 201);
  await finished(created.body.id);
  recorded.stop();

  const byTx = new Map<number, string[]>();
  for (const s of recorded.seen) byTx.set(s.transaction, [...(byTx.get(s.transaction) ?? []), s.sql.trim().replace(/\s+/g, ' ')]);
  const txOf = (pattern: RegExp) => [...byTx.values()].filter((sqls) => sqls.some((sql) => pattern.test(sql)));
  const creates = txOf(/^with alongside_0 as \(insert into generations/);
  t.equal(creates.length, 1, 'one transaction wrote the generation');
  // On PostgreSQL the batch first takes an advisory lock of its own, in the same round trip: should the connection
  // be lost, the writer waits on it to learn whether the batch committed (GroupCommitWriter.commitInOneRoundTrip).
  const shape = process.env.TEST_DATABASE_URL ? ['begin', 'select', 'with', 'commit'] : ['begin', 'with', 'commit'];
  t.same(
    creates[0]?.map((sql) => sql.split(' ')[0]!.toLowerCase().replace(/;$/, '')),
    shape,
    `the create's transaction: ${JSON.stringify(creates[0]?.map((s) => s.slice(0, 60)))}`,
  );
  const progressSql = /^update generations g set status = v\.status, timeline = v\.timeline/;
  const progress = txOf(progressSql);
  // A slot was free: the job was reserved in its create's transaction. Submitted and running are not
  // awaited, and share a transaction with each other or with the settlement when queued while a commit is in flight.
  t.ok(progress.length <= 2, `submitted and running in at most two transactions: ${progress.length}`);
  for (const sqls of progress) {
    t.equal(
      sqls.filter((sql) => progressSql.test(sql)).length,
      1,
      `one UPDATE for the progress of a transaction, whatever its rows: ${JSON.stringify(sqls.map((s) => s.slice(0, 60)))}`,
    );
    t.equal(sqls[0]!.replace(/;$/, ''), 'begin');
    t.equal(sqls.at(-1), 'commit');
  }
  const [job] = await query<{ timeline: Array<{ status: string; at: string }>; attempts: number }>('select timeline, attempts from generations where id = ?', [
    created.body.id,
  ]);
  t.same(
    job!.timeline.slice(0, 2).map((e) => e.status),
    ['queued', 'reserved'],
    'queued, then reserved',
  );
  t.equal(job!.timeline[1]!.at, job!.timeline[0]!.at, 'reserved when created, in the same transaction');
  t.equal(job!.attempts, 1, 'its one attempt counted');
  t.equal(created.body.status, 'queued', 'the 201 shows the job as created');
  const settle = txOf(/^update generations g set status = v\.status, completed_at/);
  t.equal(settle.length, 1, 'one transaction settled the job');
  t.notOk(
    settle[0]?.some((sql) => /^select txid_current/.test(sql)),
    'which reads its id in one of its own statements',
  );
});

/**
 * A job that waits in its workspace's queue (here behind the local provider's one slot) starts from the row its
 * create committed, kept by its workspace actor: its generation actor does not read it back.
 */
t.test('a job that waited in the queue starts without reading its row back', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '400', LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '1' } });
  const account = await signUp(server);
  const { key } = await createKey(server, account.cookie, account.workspaceId, ['generations.write', 'generations.read']);
  const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'wait for the slot' } };
  const query = serverQuery(server);
  const finished = endOf(query, 10);
  // The workspace's actor loaded first, by a job run to its end.
  const first = await createGeneration(server, key, account.workspaceId, body);
  t.equal(await finished(first.body.id), 'succeeded');

  const seen: string[] = [];
  const knex = server.services.db.em().getKnex();
  const listener = (q: { sql: string }) => {
    seen.push(q.sql.trim().replace(/\s+/g, ' '));
  };
  knex.on('query', listener);
  t.teardown(() => {
    knex.off('query', listener);
  });
  const running = await createGeneration(server, key, account.workspaceId, body);
  const waiting = await createGeneration(server, key, account.workspaceId, body);
  t.equal(running.status, 201);
  t.equal(waiting.status, 201);
  t.equal(await finished(running.body.id), 'succeeded');
  t.equal(await finished(waiting.body.id), 'succeeded');
  knex.off('query', listener);

  const [a] = await query<{ completed_at: Date }>('select completed_at from generations where id = ?', [running.body.id]);
  const [b] = await query<{ timeline: Array<{ status: string; at: string }> }>('select timeline from generations where id = ?', [waiting.body.id]);
  const reserved = b!.timeline.find((e) => e.status === 'reserved');
  t.ok(reserved && Date.parse(reserved.at) >= new Date(a!.completed_at).getTime(), 'the second job waited in the queue until the first ended');
  const reads = seen.filter(
    (sql) => /^select .*from "?generations"?/i.test(sql) && !sql.startsWith('select status from') && !sql.startsWith('select completed_at'),
  );
  t.same(reads, [], 'no generation row was read back by its actor');
});

/**
 * On PostgreSQL the statements of a transaction asked for together go in one network write
 * (persistence/direct-transaction.ts): a settlement's UPDATE, money, usage rollup, event and webhook lookups
 * are one round trip with its BEGIN, then COMMIT. Counted on the driver's own calls.
 */
t.test(
  'a settlement is two round trips: its statements with BEGIN, then COMMIT',
  { skip: !process.env.TEST_DATABASE_URL && 'PGlite runs in the process: no round trip to count' },
  async (t) => {
    const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
    const account = await signUp(server);
    const { key } = await createKey(server, account.cookie, account.workspaceId, ['generations.write', 'generations.read']);
    const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'count my round trips' } };
    const query = serverQuery(server);
    const finished = endOf(query, 5);
    const first = await createGeneration(server, key, account.workspaceId, body);
    t.equal(await finished(first.body.id), 'succeeded');

    const recorded = recordDriverWrites(t);
    const transactions = recordTransactions(t);
    const created = await createGeneration(server, key, account.workspaceId, body);
    t.equal(await finished(created.body.id), 'succeeded');
    recorded.stop();
    transactions.stop();
    const statements = transactions.seen.map((s) => ({ sql: s.sql.trim().replace(/\s+/g, ' '), tx: s.transaction }));
    const calls = recorded.writes.map((w) => ({ client: w.client, text: w.texts[0]! }));

    const settleSql = /^update generations g set status = v\.status, completed_at/;
    const at = calls.findIndex((c) => settleSql.test(c.text));
    t.ok(at >= 0, 'the settlement was sent');
    const sameClient = calls.filter((c) => c.client === calls[at]!.client);
    const i = sameClient.indexOf(calls[at]!);
    t.notSame(sameClient[i - 1]?.text.toLowerCase(), 'begin', 'BEGIN went in the same write as the statements');
    t.equal(sameClient[i + 1]?.text.toLowerCase(), 'commit', 'and COMMIT is the next round trip');
    const tx = statements.find((s) => settleSql.test(s.sql))?.tx;
    const inTx = statements.filter((s) => s.tx === tx).map((s) => s.sql.split(' ')[0]!.toLowerCase());
    t.ok(inTx.length >= 6, `the transaction's statements: ${JSON.stringify(inTx)}`);
    t.equal(inTx[0], 'begin');
    t.equal(inTx.at(-1), 'commit');
  },
);

/**
 * On PostgreSQL a create is one round trip: BEGIN, its statements and COMMIT go in one network write
 * (persistence/direct-transaction.ts, commitWithStatements), with or without an Idempotency-Key. Counted on the
 * driver's own calls: one call carries the statement and COMMIT.
 */
t.test(
  'a create is one round trip: its statements and COMMIT in one write',
  { skip: !process.env.TEST_DATABASE_URL && 'PGlite runs in the process: no round trip to count' },
  async (t) => {
    // Jobs held at the provider, so that the creates below only queue (a free slot would be reserved in lane 0).
    const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '60000' } });
    const account = await signUp(server);
    const { key } = await createKey(server, account.cookie, account.workspaceId, ['generations.write', 'generations.read']);
    const body = { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'one round trip' } };
    t.equal((await createGeneration(server, key, account.workspaceId, body)).status, 201, 'a first job loads the workspace');

    const recorded = recordDriverWrites(t);
    const plain = await createGeneration(server, key, account.workspaceId, body);
    const keyed = await createGeneration(server, key, account.workspaceId, body, { 'idempotency-key': 'one-round-trip-1' });
    recorded.stop();
    const calls = recorded.writes;
    t.equal(plain.status, 201);
    t.equal(keyed.status, 201);

    const creates = calls.filter((c) => c.texts.some((text) => /^with alongside_0 as \(insert into generations/.test(text)));
    t.equal(creates.length, 2, 'each create sent its statement once');
    for (const [i, call] of creates.entries()) {
      t.equal(
        call.texts.at(-1)?.toLowerCase(),
        'commit',
        `create ${i + 1}: COMMIT went in the same write: ${JSON.stringify(call.texts.map((s) => s.slice(0, 40)))}`,
      );
      const next = calls.slice(calls.indexOf(call) + 1).find((c) => c.client === call.client);
      t.notMatch(next?.texts[0] ?? '', /^(commit|rollback)$/i, `create ${i + 1}: no COMMIT or ROLLBACK of its own after it`);
    }
    t.ok(
      creates[1]!.texts.some((text) => /insert into idempotency_keys/.test(text)),
      'the Idempotency-Key rides in the same statement',
    );
    const [row] = await serverQuery(server)<{ key: string }>('select key from idempotency_keys where workspace_id = ?', [account.workspaceId]);
    t.equal(row?.key, 'one-round-trip-1', 'and was stored');
  },
);
