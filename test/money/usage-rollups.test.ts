import t, { type Test } from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { serverQuery } from '../generations/flow.ts';
import { completeCheckout, get, MONEY_ENV, post } from './support.ts';
import { recount, rollupsAndRecount, type Query } from './usage-support.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * GET /v1/usage answers from the usage rollups (whole days) and the rows of the partial edge days; these
 * tests hold both to the old count over the rows (usage-support.ts) after workloads that change every figure.
 */

const text = (prompt: string, paymentMode = 'credits') => ({ mode: 'text_to_text', model: 'local/text-mini', params: { prompt }, paymentMode });
const image = (prompt: string, paymentMode = 'wallet') => ({ mode: 'text_to_image', model: 'local/image-fast', params: { prompt, numImages: 1 }, paymentMode });

/**
 * Moves the clock (the local provider's latency and the queue deadlines run on it) until every job of the
 * workspaces has ended; a bound on the steps only against hanging.
 */
async function runOut(server: TestServer, clock: ManualClock, query: Query, workspaceIds: string[]): Promise<void> {
  // Each try moves the clock a step when jobs are left (400 steps before, at 10 ms: a bound against hanging only).
  await eventually(
    async () => {
      await server.services.actors.drain();
      await server.services.writer.flush();
      const [row] = await query<{ n: string | number }>(
        `select count(*) as n from generations where workspace_id in (?) and status in ('queued', 'reserved', 'submitted', 'running')`,
        [workspaceIds],
      );
      if (Number(row!.n) === 0) return true;
      clock.advance(5_000);
      return false;
    },
    { timeoutMs: 60_000, what: 'the jobs finishing' },
  );
}

/** Waits for jobs started without a clock to end (wall-clock bound only against hanging). */
async function drained(server: TestServer, query: Query, workspaceId: string): Promise<void> {
  await eventually(
    async () => {
      await server.services.actors.drain();
      const [row] = await query<{ n: string | number }>(
        `select count(*) as n from generations where workspace_id = ? and status in ('queued', 'reserved', 'submitted', 'running')`,
        [workspaceId],
      );
      return Number(row!.n) === 0;
    },
    { timeoutMs: 60_000, everyMs: 20, what: 'the jobs finishing' },
  ).catch(async (error) => {
    // What is left unfinished, so that a failure says where each job stopped.
    const left = await query<{ id: string; status: string; provider_job_id: string | null; timeline: unknown }>(
      `select id, status, provider_job_id, timeline from generations where workspace_id = ? and status in ('queued', 'reserved', 'submitted', 'running')`,
      [workspaceId],
    );
    throw new Error(`${(error as Error).message}; unfinished: ${JSON.stringify(left)}`);
  });
}

async function compareRollups(t: Test, query: Query) {
  const { rollups, recounted } = await rollupsAndRecount(query);
  t.ok(rollups.length > 0, 'there are rollup rows');
  t.same(rollups, recounted, 'every rollup row equals a recount of its generations, ledger and assets');
}

t.test('after a mixed workload over several UTC days, the rollups equal a recount and every range answers as the old count did', async (t) => {
  const start = Date.UTC(2026, 5, 1, 20, 0, 0);
  const clock = new ManualClock(start);
  const server = await startTestServer(t, {
    clock,
    env: { ...MONEY_ENV, RATE_LIMIT_FREE: '100000', QUEUE_TIMEOUT_MS: '60000', LOCAL_PROVIDER_LATENCY_MS: '30000', LOCAL_PROVIDER_FAILURE_PERCENT: '30' },
  });
  const query = serverQuery(server);
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const k1 = await createKey(server, owner.cookie, ws, ['all'], { name: 'one' });
  const k2 = await createKey(server, owner.cookie, ws, ['all'], { name: 'two' });
  // Another workspace's usage must never count in this one's.
  const other = await signUp(server);
  const otherKey = await createKey(server, other.cookie, other.workspaceId, ['all']);

  const order = await post(server, '/v1/wallet/top-ups', owner.cookie, { workspaceId: ws, amountCents: 5000 });
  t.equal(order.status, 201, JSON.stringify(order.body));
  await completeCheckout(order.body.checkoutUrl, 'pay');

  const create = async (credential: string, body: Record<string, unknown>, workspaceId = ws) => {
    const created = await post(server, '/v1/generations', credential, { workspaceId, ...body });
    t.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.id as string;
  };

  // Five phases nine hours apart: 20:00 on June 1st, then 05:00, 14:00, 23:00 on the 2nd, 08:00 on the 3rd.
  // Each job takes 30 s of the clock, two run at a time (the free plan), the rest wait in the queue for at
  // most 60 s: some succeed, some fail (the provider's simulated failures), the last ones expire, one is cancelled.
  for (let phase = 0; phase < 5; phase++) {
    const started = clock.now();
    await create(k2.key, image(`p${phase} k2`));
    await create(k1.key, image(`p${phase} k1`, 'credits'));
    await create(k1.key, text(`p${phase} k1`));
    await create(k2.key, text(`p${phase} k2 wallet`, 'wallet'));
    await create(owner.cookie, text(`p${phase} session`, 'auto'));
    const toCancel = await create(k1.key, text(`p${phase} to cancel`));
    await create(k2.key, image(`p${phase} k2 late`, 'auto'));
    await create(k1.key, text(`p${phase} k1 late`));
    await create(otherKey.key, text(`p${phase} other`), other.workspaceId);
    const cancelled = await post(server, `/v1/generations/${toCancel}/cancel?workspaceId=${ws}`, k1.key, {});
    t.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    await runOut(server, clock, query, [ws, other.workspaceId]);
    clock.advance(9 * 3_600_000 - (clock.now() - started));
  }
  const before = await recount(query, ws, null, '2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z');
  t.ok(before.outputBytes > 0, `the workload has output bytes (${before.outputBytes})`);
  // One output deleted: its bytes leave the usage, as they leave the old count.
  const [asset] = await query<{ id: string }>('select id from assets where workspace_id = ? and source_generation_id is not null order by id limit 1', [ws]);
  t.ok(asset, 'an output asset exists');
  const deleted = await server.json(`/v1/assets/${asset!.id}?workspaceId=${ws}`, { method: 'DELETE', headers: { cookie: owner.cookie } });
  t.ok(deleted.status === 200 || deleted.status === 204, `asset deleted (${deleted.status})`);
  // And some left running and queued: they count as unfinished.
  for (let i = 0; i < 3; i++) await create(k1.key, text(`left ${i}`));
  await server.services.writer.flush();

  const whole = await recount(query, ws, null, '2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z');
  for (const figure of ['succeeded', 'failed', 'cancelled', 'expired', 'unfinished', 'credits', 'creditsFromBalance', 'costCents'] as const) {
    t.ok(whole[figure] > 0, `the workload has ${figure} (${whole[figure]})`);
  }
  await compareRollups(t, query);

  const day = 86_400_000;
  const iso = (ms: number) => new Date(ms).toISOString();
  const ranges: Array<[string, string]> = [
    ['2026-06-01', '2026-06-03'],
    ['2026-06-02', '2026-06-02'],
    [iso(start - day), iso(start + 3 * day)],
    [iso(start), iso(start + 9 * 3_600_000)],
    [iso(start + 1), iso(start + 27 * 3_600_000 + 1)],
    ['2026-06-02T00:00:00Z', '2026-06-03T00:00:00Z'],
    ['2026-06-02T00:00:00.0000001Z', '2026-06-03T00:00:00.0000001Z'],
    ['2026-06-02T02:00:00+02:00', '2026-06-03T12:00:00-03:00'],
    ['2026-06-02T13:59:59.999Z', '2026-06-02T14:00:00.001Z'],
    ['2026-06-01T21:00:00Z', '2026-06-02T04:59:00Z'],
  ];
  // And random ones, by the second, over the four days around the workload.
  let seed = 7;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 12; i++) {
    const a = Date.UTC(2026, 4, 31) + Math.floor(random() * 4 * 86_400) * 1000;
    const b = a + Math.floor(random() * 3 * 86_400 + 1) * 1000;
    ranges.push([iso(a), iso(b)]);
  }
  const bound = (value: string, edge: 'from' | 'to') =>
    value.length === 10 ? (edge === 'to' ? iso(Date.parse(`${value}T00:00:00Z`) + day) : `${value}T00:00:00Z`) : value;
  for (const [from, to] of ranges) {
    const qs = `workspaceId=${ws}&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
    for (const [who, credential, keyId] of [
      ['session', owner.cookie, null],
      ['key one', k1.key, k1.id],
      ['key two', k2.key, k2.id],
    ] as const) {
      const answer = await get(server, `/v1/usage?${qs}`, credential);
      t.equal(answer.status, 200, JSON.stringify(answer.body));
      const expected = await recount(query, ws, keyId, bound(from, 'from'), bound(to, 'to'));
      const { total, succeeded, failed, cancelled, expired, unfinished: open } = expected;
      t.same(answer.body.generations, { total, succeeded, failed, cancelled, expired, unfinished: open }, `${who} ${from} .. ${to}: generations`);
      t.same(
        [answer.body.credits, answer.body.creditsFromBalance, answer.body.costCents, answer.body.outputBytes],
        [expected.credits, expected.creditsFromBalance, expected.costCents, expected.outputBytes],
        `${who} ${from} .. ${to}: money and bytes`,
      );
    }
    const asOwner = await get(server, `/v1/usage?${qs}&apiKeyId=${k2.id}`, owner.cookie);
    t.same(asOwner.body.generations.total, (await recount(query, ws, k2.id, bound(from, 'from'), bound(to, 'to'))).total, 'signed in, one key');
  }

  // The per-key usage by day counts the same generations.
  const perKey = await get(server, `/v1/api-keys/${k1.id}/usage?from=2026-05-31&to=2026-06-04`, owner.cookie);
  t.equal(perKey.status, 200, JSON.stringify(perKey.body));
  const byDay = await query<{ day: string; n: string | number }>(
    `select to_char((created_at at time zone 'UTC')::date, 'YYYY-MM-DD') as day, count(*) as n from generations where api_key_id = ? group by 1`,
    [k1.id],
  );
  t.same(
    perKey.body.data
      .filter((d: { generations: number }) => d.generations > 0)
      .map((d: { day: string; generations: number }) => [d.day, d.generations])
      .sort(),
    byDay.map((r) => [r.day, Number(r.n)]).sort(),
    'per-key generations by day',
  );
});

t.test('many creates in parallel, in two workspaces and several keys, leave rollups equal to a recount', async (t) => {
  const server = await startTestServer(t, { env: { ...MONEY_ENV, RATE_LIMIT_FREE: '100000', LOCAL_PROVIDER_FAILURE_PERCENT: '20' } });
  const query = serverQuery(server);
  const users = [await signUp(server), await signUp(server)];
  const keys: Array<{ ws: string; id: string; key: string }> = [];
  for (const user of users)
    for (let k = 0; k < 2; k++) keys.push({ ws: user.workspaceId, ...(await createKey(server, user.cookie, user.workspaceId, ['all'])) });
  for (let round = 0; round < 3; round++) {
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) => {
        const key = keys[i % keys.length]!;
        return post(server, '/v1/generations', key.key, {
          workspaceId: key.ws,
          ...(i % 3 === 0 ? image(`r${round} ${i}`, 'credits') : text(`r${round} ${i}`)),
        });
      }),
    );
    t.ok(
      answers.some((a) => a.status === 201),
      'some creates succeeded',
    );
    t.ok(
      answers.every((a) => a.status === 201 || a.status === 429 || a.status === 402 || a.status === 422),
      `creates answer 201, 429, 402 or 422: ${answers.map((a) => a.status).join(' ')}`,
    );
    for (const user of users) await drained(server, query, user.workspaceId);
  }
  await server.services.writer.flush();
  await compareRollups(t, query);
  for (const user of users) {
    const answer = await get(server, `/v1/usage?workspaceId=${user.workspaceId}`, user.cookie);
    const now = new Date(server.services.clock.now());
    const expected = await recount(
      query,
      user.workspaceId,
      null,
      `${now.toISOString().slice(0, 7)}-01T00:00:00.000Z`,
      new Date(now.getTime() + 1).toISOString(),
    );
    t.equal(answer.body.generations.total, expected.total);
    t.same([answer.body.credits, answer.body.outputBytes], [expected.credits, expected.outputBytes]);
  }
});
