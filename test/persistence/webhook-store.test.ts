import t from 'tap';
import type { DeliveryAttempt } from '../../persistence/entities/webhook.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import * as deliveries from '../../persistence/stores/webhooks/deliveries.ts';
import * as endpoints from '../../persistence/stores/webhooks/endpoints.ts';
import type { WebhookEndpointRow } from '../../persistence/entities/webhook.ts';
import { findEvent, insertEvents, listWorkspaceEvents, type StoredEvent } from '../../persistence/stores/webhooks/events.ts';
import { claimRecoveryRow, readRecoveryRow, writeRecoveryAnswer } from '../../persistence/stores/webhooks/recoveries.ts';
import { purgeWebhookHistory } from '../../persistence/stores/webhooks/retention.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { insertEndpoint, insertWorkspace, storeDatabase } from './store-support.ts';

/**
 * The webhook stores on a real database (PGlite, or PostgreSQL with TEST_DATABASE_URL): endpoints
 * (webhooks/endpoints.ts), kept events
 * (webhooks/events.ts), deliveries made, read by their endpoints, recorded and re-sent (webhooks/deliveries.ts),
 * recover requests' Idempotency-Keys (webhooks/recoveries.ts) and the history's purge (webhooks/retention.ts).
 * No service, no actor: the statements alone.
 */
const { db, query } = await storeDatabase(t);
const AT = new Date('2026-12-01T10:00:00.000Z');
const ms = (n: number) => new Date(AT.getTime() + n);
const workspace = () => insertWorkspace(query);
/** An endpoint of the workspace: active and subscribed to `types` unless said otherwise. */
const endpoint = (workspaceId: string, id: string, types: string[], state: { disabled?: boolean; deletedAt?: Date } = {}) =>
  insertEndpoint(query, workspaceId, id, types, state);
type Row = { id: string; endpoint_id: string; status: string; body: string; attempt_count: number; failure_reason: string | null; resend_of: string | null };
async function delivery(id: string): Promise<Row | undefined> {
  const [row] = await query<Row>('select id, endpoint_id, status, body, attempt_count, failure_reason, resend_of from webhook_deliveries where id = ?', [id]);
  return row;
}
const attempt = (n: number, responseStatus: number | null, error: string | null = null): DeliveryAttempt => ({
  attemptNumber: n,
  at: ms(n * 1_000).toISOString(),
  responseStatus,
  error,
  durationMs: 12,
});
/** Pending deliveries of one event each, made as a budget crossing's are. */
async function pending(workspaceId: string, endpointId: string, ids: string[], at = AT): Promise<void> {
  await deliveries.insertEndpointDeliveries(
    db.em(),
    workspaceId,
    'budget.crossed',
    ids.map((id) => ({ id, endpoint_id: endpointId, event_id: `evt_${id}`, body: `{"id":"${id}"}`, at })),
  );
}

t.test('events: written in one statement, read by their workspace only, listed newest first by type, time and id', async (t) => {
  const [a, other] = [await workspace(), await workspace()];
  const event = (id: string, workspaceId: string, eventType: string, at: Date, generationId: string | null = null): StoredEvent => ({
    id,
    workspaceId,
    generationId,
    eventType,
    rest: `"type":"${eventType}"}`,
    createdAt: at,
  });
  await insertEvents(db.em(), []);
  await insertEvents(db.em(), [
    event('evt_01', a, 'generation.succeeded', ms(0), 'gen_1'),
    event('evt_02', a, 'generation.failed', ms(1_000)),
    event('evt_03', a, 'generation.succeeded', ms(2_000)),
    event('evt_04', other, 'generation.succeeded', ms(3_000)),
  ]);
  t.same(await findEvent(openUnit(db), a, 'evt_01'), event('evt_01', a, 'generation.succeeded', ms(0), 'gen_1'), 'as written, the time a Date');
  t.equal(await findEvent(openUnit(db), a, 'evt_04'), undefined, "another workspace's");
  t.equal(await findEvent(openUnit(db), a, 'evt_none'), undefined);
  const ids = async (filter: Parameters<typeof listWorkspaceEvents>[2], limit = 10) =>
    (await listWorkspaceEvents(openUnit(db), a, filter, limit)).map((e) => e.id);
  t.same(await ids({}), ['evt_03', 'evt_02', 'evt_01'], 'newest first, its own only');
  t.same(await ids({ type: 'generation.succeeded' }), ['evt_03', 'evt_01']);
  t.same(await ids({ from: ms(1_000) }), ['evt_03', 'evt_02'], 'from: at or after');
  t.same(await ids({ to: ms(1_000) }), ['evt_01'], 'to: before');
  t.same(await ids({ before: 'evt_03' }), ['evt_02', 'evt_01'], 'before the id of the page before');
  t.same(await ids({}, 1), ['evt_03'], 'a limit');
});

t.test("insertEventDeliveries: one delivery per active, subscribed, live endpoint, ids taken in the endpoints' order", async (t) => {
  const a = await workspace();
  const e1 = await endpoint(a, `whe_${a}_1`, ['generation.succeeded']);
  const e2 = await endpoint(a, `whe_${a}_2`, ['generation.succeeded', 'generation.failed']);
  await endpoint(a, `whe_${a}_3`, ['generation.failed']);
  await endpoint(a, `whe_${a}_4`, ['generation.succeeded'], { disabled: true });
  await endpoint(a, `whe_${a}_5`, ['generation.succeeded'], { deletedAt: AT });
  const made = await deliveries.insertEventDeliveries(db.em(), [
    {
      generation_id: 'gen_a',
      workspace_id: a,
      event_type: 'generation.succeeded',
      event_id: 'evt_a',
      created_at: AT,
      trace_parent: '00-trace-01',
      rest: '"type":"generation.succeeded"}',
      ids: ['dlv_a1', 'dlv_a2'],
    },
    // An endpoint made since the count: fewer ids than endpoints, so the second waits for the next event.
    {
      generation_id: 'gen_b',
      workspace_id: a,
      event_type: 'generation.succeeded',
      event_id: null,
      created_at: AT,
      trace_parent: null,
      rest: '"b":1}',
      ids: ['dlv_b1'],
    },
  ]);
  t.same(
    made.map((m) => [m.generation_id, m.endpoint_id]).sort(),
    [
      ['gen_a', e1],
      ['gen_a', e2],
      ['gen_b', e1],
    ].sort(),
  );
  t.same(await delivery('dlv_a1'), {
    id: 'dlv_a1',
    endpoint_id: e1,
    status: 'pending',
    body: '{"id":"dlv_a1","type":"generation.succeeded"}',
    attempt_count: 0,
    failure_reason: null,
    resend_of: null,
  });
  t.equal((await delivery('dlv_a2'))?.endpoint_id, e2, 'the second id to the second endpoint by id');
  const [traced] = await query<{ trace_parent: string; event_id: string; generation_id: string }>(
    'select trace_parent, event_id, generation_id from webhook_deliveries where id = ?',
    ['dlv_a1'],
  );
  t.same(traced, { trace_parent: '00-trace-01', event_id: 'evt_a', generation_id: 'gen_a' });
});

t.test('pending deliveries: read oldest first per endpoint, of many at once; the endpoints that have some, by shard', async (t) => {
  const a = await workspace();
  const [e1, e2, e3] = [await endpoint(a, `whe_${a}_1`, []), await endpoint(a, `whe_${a}_2`, []), await endpoint(a, `whe_${a}_3`, [])];
  await pending(a, e1, [`dlv_${a}_3`, `dlv_${a}_1`, `dlv_${a}_2`]);
  await pending(a, e2, [`dlv_${a}_4`]);
  await pending(a, e3, [`dlv_${a}_5`]);
  await deliveries.writeDeliveryFinal(db.em(), `dlv_${a}_5`, { status: 'delivered', attempts: [attempt(1, 200)] }, AT);
  const read = await deliveries.readPending(db, e1, 2);
  t.same(
    read.map((r) => r.id),
    [`dlv_${a}_1`, `dlv_${a}_2`],
    'oldest first by id, to the limit',
  );
  t.same([read[0]!.event_type, read[0]!.body, read[0]!.trace_parent], ['budget.crossed', `{"id":"dlv_${a}_1"}`, null]);
  t.same(
    (
      await deliveries.readPendingOfMany(db, [
        { endpointId: e2, limit: 5 },
        { endpointId: e1, limit: 1 },
        { endpointId: e3, limit: 5 },
      ])
    ).map((rows) => rows.map((r) => r.id)),
    [[`dlv_${a}_4`], [`dlv_${a}_1`], []],
    'per request, in its order, what readPending answers for it',
  );
  t.same(await deliveries.readPendingOfMany(db, []), []);
  const withPending = await deliveries.endpointsWithPending(db);
  t.ok(withPending.includes(e1) && withPending.includes(e2) && !withPending.includes(e3), 'the endpoints with a pending delivery');
  const shardCount = 4;
  const home = shardOf(a, shardCount);
  t.ok((await deliveries.endpointsWithPending(db, { shard: home, shardCount })).includes(e1), "its workspace's shard");
  t.notOk((await deliveries.endpointsWithPending(db, { shard: (home + 1) % shardCount, shardCount })).includes(e1), 'not another shard');
});

t.test('writeDeliveryStates: first-attempt successes and whole states, each only over a pending delivery', async (t) => {
  const a = await workspace();
  const e = await endpoint(a, `whe_${a}`, []);
  const ids = ['ok', 'retry', 'failed', 'done', 'second'].map((s) => `dlv_${a}_${s}`);
  await pending(a, e, ids);
  await deliveries.writeDeliveryFinal(db.em(), ids[3]!, { status: 'failed', attempts: [attempt(1, 500)], failureReason: 'gone' }, AT);
  const at = ms(9_000).toISOString();
  await deliveries.writeDeliveryStates(db.em(), [
    { id: ids[0]!, status: 'delivered', attempts: [attempt(1, 204)], attempt_count: 1, next_attempt_at: null, failure_reason: null, updated_at: at },
    {
      id: ids[1]!,
      status: 'pending',
      attempts: [attempt(1, 503)],
      attempt_count: 1,
      next_attempt_at: ms(60_000).toISOString(),
      failure_reason: null,
      updated_at: at,
    },
    {
      id: ids[2]!,
      status: 'failed',
      attempts: [attempt(1, null, 'refused')],
      attempt_count: 1,
      next_attempt_at: null,
      failure_reason: 'refused',
      updated_at: at,
    },
    { id: ids[3]!, status: 'delivered', attempts: [attempt(1, 200)], attempt_count: 1, next_attempt_at: null, failure_reason: null, updated_at: at },
    {
      id: ids[4]!,
      status: 'delivered',
      attempts: [attempt(1, 500), attempt(2, 200)],
      attempt_count: 2,
      next_attempt_at: null,
      failure_reason: null,
      updated_at: at,
    },
  ]);
  await deliveries.writeDeliveryStates(db.em(), []);
  const rows = await query<{
    id: string;
    status: string;
    attempts: DeliveryAttempt[];
    attempt_count: number;
    next_attempt_at: unknown;
    failure_reason: string | null;
    updated: string;
  }>(
    `select id, status, attempts, attempt_count, next_attempt_at, failure_reason,
       to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as updated
     from webhook_deliveries where id in (?, ?, ?, ?, ?)`,
    ids,
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  const ok = byId.get(ids[0]!)!;
  t.same(
    [ok.status, ok.attempts, ok.attempt_count, ok.next_attempt_at, ok.failure_reason, ok.updated],
    ['delivered', [attempt(1, 204)], 1, null, null, at],
    'the short form builds the same row',
  );
  const retry = byId.get(ids[1]!)!;
  t.same([retry.status, retry.attempts, retry.attempt_count, retry.next_attempt_at !== null], ['pending', [attempt(1, 503)], 1, true]);
  const failed = byId.get(ids[2]!)!;
  t.same([failed.status, failed.failure_reason, failed.attempts], ['failed', 'refused', [attempt(1, null, 'refused')]]);
  const done = byId.get(ids[3]!)!;
  t.same([done.status, done.failure_reason, done.attempts], ['failed', 'gone', [attempt(1, 500)]], 'a delivery no longer pending is left as it is');
  const second = byId.get(ids[4]!)!;
  t.same([second.status, second.attempt_count, second.attempts], ['delivered', 2, [attempt(1, 500), attempt(2, 200)]], 'delivered at a later attempt: whole');
});

t.test('writeDeliveryStates: a record unlike a first-attempt success in any one field is written as given', async (t) => {
  const a = await workspace();
  const e = await endpoint(a, `whe_${a}`, []);
  const at = ms(9_000).toISOString();
  const success: Omit<deliveries.DeliveryStateRecord, 'id'> = {
    status: 'delivered',
    attempts: [attempt(1, 200)],
    attempt_count: 1,
    next_attempt_at: null,
    failure_reason: null,
    updated_at: at,
  };
  const unlike: Record<string, Partial<Omit<deliveries.DeliveryStateRecord, 'id'>>> = {
    status: { status: 'failed' },
    number: { attempts: [{ ...attempt(1, 200), attemptNumber: 2 }] },
    error: { attempts: [attempt(1, 200, 'reset after the answer')] },
    response: { attempts: [attempt(1, null)] },
    next: { next_attempt_at: ms(60_000).toISOString() },
    reason: { failure_reason: 'noted' },
  };
  const ids = Object.keys(unlike).map((name) => `dlv_${a}_${name}`);
  await pending(a, e, ids);
  await deliveries.writeDeliveryStates(
    db.em(),
    Object.entries(unlike).map(([name, change]) => ({ ...success, ...change, id: `dlv_${a}_${name}` })),
  );
  const rows = await query<{ id: string; status: string; attempts: DeliveryAttempt[]; next_attempt_at: unknown; failure_reason: string | null }>(
    'select id, status, attempts, next_attempt_at, failure_reason from webhook_deliveries where endpoint_id = ?',
    [e],
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const [name, change] of Object.entries(unlike)) {
    const row = byId.get(`dlv_${a}_${name}`)!;
    const wanted = { ...success, ...change };
    t.same(
      [row.status, row.attempts, row.next_attempt_at !== null, row.failure_reason],
      [wanted.status, wanted.attempts, wanted.next_attempt_at !== null, wanted.failure_reason],
      `${name}: written whole, as given`,
    );
  }
});

t.test('a delivery final, its attempts read and replaced; every pending delivery of an endpoint failed', async (t) => {
  const a = await workspace();
  const [e, other] = [await endpoint(a, `whe_${a}_1`, []), await endpoint(a, `whe_${a}_2`, [])];
  const [d1, d2, d3] = [`dlv_${a}_1`, `dlv_${a}_2`, `dlv_${a}_3`];
  await pending(a, e, [d1, d2]);
  await pending(a, other, [d3]);
  t.same(await deliveries.readDeliveryAttempts(db.em(), d1), { attempts: [], status: 'pending' });
  t.equal(await deliveries.readDeliveryAttempts(db.em(), 'dlv_missing'), undefined);
  await deliveries.writeDeliveryFinal(db.em(), d1, { status: 'expired', attempts: [attempt(1, 500), attempt(2, 502)] }, ms(5_000));
  t.same(await deliveries.readDeliveryAttempts(db.em(), d1), { attempts: [attempt(1, 500), attempt(2, 502)], status: 'expired' });
  t.same(await delivery(d1).then((r) => [r?.attempt_count, r?.failure_reason]), [2, null]);
  await deliveries.writeDeliveryAttempts(db.em(), d1, [attempt(1, 500), attempt(2, 502), attempt(3, 200)], ms(6_000));
  t.same(
    await deliveries.readDeliveryAttempts(db.em(), d1),
    { attempts: [attempt(1, 500), attempt(2, 502), attempt(3, 200)], status: 'expired' },
    'its status kept',
  );
  t.equal((await delivery(d1))?.attempt_count, 3);

  await deliveries.failPendingDeliveries(db.em(), e, 'endpoint disabled', ms(7_000));
  t.same(await delivery(d2).then((r) => [r?.status, r?.failure_reason]), ['failed', 'endpoint disabled']);
  t.same(await delivery(d1).then((r) => [r?.status, r?.failure_reason]), ['expired', null], 'one no longer pending is left');
  t.equal((await delivery(d3))?.status, 'pending', "another endpoint's are left");
});

t.test('first deliveries of a stored event, re-sent copies, failed ones to recover, an endpoint page', async (t) => {
  const a = await workspace();
  const [e, other] = [await endpoint(a, `whe_${a}_1`, []), await endpoint(a, `whe_${a}_2`, [])];
  await deliveries.insertEventToEndpoints(
    db.em(),
    { id: `evt_${a}_disabled`, workspaceId: a, eventType: 'webhook_endpoint.disabled' },
    [
      { id: `dlv_${a}_01`, endpoint_id: e, body: '{"id":"x1"}' },
      { id: `dlv_${a}_02`, endpoint_id: other, body: '{"id":"x2"}' },
    ],
    ms(1_000),
  );
  await deliveries.insertFirstDelivery(
    openUnit(db),
    { id: `dlv_${a}_03`, endpointId: e, workspaceId: a, generationId: 'gen_x', eventType: 'generation.failed', eventId: `evt_${a}_g`, body: '{"id":"x3"}' },
    ms(2_000),
  );
  t.equal(await deliveries.firstDeliveryOfEvent(openUnit(db), e, `evt_${a}_disabled`), `dlv_${a}_01`);
  t.equal(await deliveries.firstDeliveryOfEvent(openUnit(db), other, `evt_${a}_g`), undefined, 'of this endpoint only');
  const made = await deliveries.readDelivery(openUnit(db), `dlv_${a}_03`);
  t.same([made.endpointId, made.generationId, made.eventType, made.status, made.body], [e, 'gen_x', 'generation.failed', 'pending', '{"id":"x3"}']);

  await deliveries.writeDeliveryFinal(db.em(), `dlv_${a}_01`, { status: 'failed', attempts: [attempt(1, 500)], failureReason: 'no' }, ms(3_000));
  await deliveries.writeDeliveryFinal(db.em(), `dlv_${a}_03`, { status: 'expired', attempts: [attempt(1, 500)] }, ms(3_000));
  t.same(
    (await deliveries.failedDeliveriesIn(openUnit(db), e, AT, ms(10_000), 10)).map((d) => d.id),
    [`dlv_${a}_01`, `dlv_${a}_03`],
    'failed and expired, oldest first',
  );
  t.same(
    (await deliveries.failedDeliveriesIn(openUnit(db), e, ms(1_500), ms(10_000), 10)).map((d) => d.id),
    [`dlv_${a}_03`],
    'since',
  );
  t.same(
    (await deliveries.failedDeliveriesIn(openUnit(db), e, AT, ms(2_000), 10)).map((d) => d.id),
    [`dlv_${a}_01`],
    'until, excluded',
  );
  t.same(
    (await deliveries.failedDeliveriesIn(openUnit(db), e, AT, ms(10_000), 1)).map((d) => d.id),
    [`dlv_${a}_01`],
    'a limit',
  );

  const copies = await deliveries.insertResendCopies(
    openUnit(db),
    e,
    [
      { id: `dlv_${a}_11`, original: `dlv_${a}_01` },
      { id: `dlv_${a}_12`, original: `dlv_${a}_02` },
    ],
    ms(4_000),
  );
  t.same(copies, [`dlv_${a}_11`], 'an original of another endpoint makes none');
  t.same(await delivery(`dlv_${a}_11`), {
    id: `dlv_${a}_11`,
    endpoint_id: e,
    status: 'pending',
    body: '{"id":"x1"}',
    attempt_count: 0,
    failure_reason: null,
    resend_of: `dlv_${a}_01`,
  });
  t.same(
    (await deliveries.failedDeliveriesIn(openUnit(db), e, AT, ms(10_000), 10)).map((d) => d.id),
    [`dlv_${a}_03`],
    'one whose re-send is pending is left out',
  );

  const page = async (filter: { status?: string; before?: string }, limit = 10) =>
    (await deliveries.listEndpointDeliveries(openUnit(db), { id: e, workspaceId: a }, filter, limit)).map((d) => d.id);
  t.same(await page({}), [`dlv_${a}_11`, `dlv_${a}_03`, `dlv_${a}_01`], 'newest first by id');
  t.same(await page({ status: 'failed' }), [`dlv_${a}_01`]);
  t.same(await page({ before: `dlv_${a}_03` }), [`dlv_${a}_01`]);
  t.same(await page({}, 1), [`dlv_${a}_11`]);
  t.same(await deliveries.listEndpointDeliveries(openUnit(db), { id: e, workspaceId: 'ws_other' }, {}, 10), [], "never through another workspace's name");
});

t.test("recover requests' keys: claimed once, taken over when expired, their answer kept", async (t) => {
  const a = await workspace();
  const e = await endpoint(a, `whe_${a}`, []);
  const row = { endpointId: e, key: 'rk-1', workspaceId: a, hash: 'h1' };
  t.equal(await readRecoveryRow(openUnit(db), e, 'rk-1'), undefined);
  t.equal(await claimRecoveryRow(openUnit(db), row, AT, ms(-1)), true, 'a new key is claimed');
  t.same(await readRecoveryRow(openUnit(db), e, 'rk-1'), { hash: 'h1', answer: {} });
  t.equal(await claimRecoveryRow(openUnit(db), { ...row, hash: 'h2' }, ms(1_000), AT), false, 'made at `expiredBefore`: not expired, kept');
  t.same(await readRecoveryRow(openUnit(db), e, 'rk-1'), { hash: 'h1', answer: {} });
  await writeRecoveryAnswer(openUnit(db), e, 'rk-1', { recovered: 3 });
  t.same(await readRecoveryRow(openUnit(db), e, 'rk-1'), { hash: 'h1', answer: { recovered: 3 } });
  t.equal(await claimRecoveryRow(openUnit(db), { ...row, hash: 'h3' }, ms(2_000), ms(1)), true, 'expired: taken over');
  t.same(await readRecoveryRow(openUnit(db), e, 'rk-1'), { hash: 'h3', answer: {} }, 'its answer reset with it');
  t.equal(await readRecoveryRow(openUnit(db), `whe_other`, 'rk-1'), undefined, "another endpoint's key of the same name is another key");
});

t.test("purgeWebhookHistory: old deliveries past the kept, deleted endpoints, old events and keys; one shard's when owned", async (t) => {
  const a = await workspace();
  const e = await endpoint(a, `whe_${a}_1`, []);
  const gone = await endpoint(a, `whe_${a}_2`, [], { deletedAt: ms(-60_000) });
  const recent = await endpoint(a, `whe_${a}_3`, [], { deletedAt: ms(60_000) });
  // e: five deliveries, oldest first: delivered, failed long ago, failed lately, delivered, pending.
  const ids = [1, 2, 3, 4, 5].map((n) => `dlv_${a}_${n}`);
  await pending(a, e, ids);
  await deliveries.writeDeliveryFinal(db.em(), ids[0]!, { status: 'delivered', attempts: [attempt(1, 200)] }, AT);
  await deliveries.writeDeliveryFinal(db.em(), ids[1]!, { status: 'failed', attempts: [attempt(1, 500)] }, AT);
  await query('update webhook_deliveries set created_at = ? where id = ?', [ms(-86_400_000), ids[1]]);
  await deliveries.writeDeliveryFinal(db.em(), ids[2]!, { status: 'failed', attempts: [attempt(1, 500)] }, AT);
  await deliveries.writeDeliveryFinal(db.em(), ids[3]!, { status: 'delivered', attempts: [attempt(1, 200)] }, AT);
  await insertEvents(db.em(), [
    { id: `evt_${a}_old`, workspaceId: a, generationId: null, eventType: 'x', rest: '}', createdAt: ms(-10_000) },
    { id: `evt_${a}_new`, workspaceId: a, generationId: null, eventType: 'x', rest: '}', createdAt: ms(10_000) },
  ]);
  await claimRecoveryRow(openUnit(db), { endpointId: e, key: 'old', workspaceId: a, hash: 'h' }, ms(-10_000), ms(-20_000));
  await claimRecoveryRow(openUnit(db), { endpointId: e, key: 'new', workspaceId: a, hash: 'h' }, ms(10_000), ms(-20_000));
  const purge = { deliveriesKept: 1, failedSince: ms(-1_000), deletedBefore: AT, eventsBefore: AT, recoveriesBefore: AT };

  const shardCount = 4;
  const elsewhere = [0, 1, 2, 3].filter((s) => s !== shardOf(a, shardCount));
  const untouched = await purgeWebhookHistory(db, purge, { shards: elsewhere, shardCount });
  t.ok(await delivery(ids[0]!), "another node's shards: its deliveries are left");
  t.ok((await query('select 1 from webhook_endpoints where id = ?', [gone])).length === 1, 'and its endpoints');
  t.ok(untouched.deliveries >= 0);

  const purged = await purgeWebhookHistory(db, purge, { shards: [shardOf(a, shardCount)], shardCount });
  t.same(
    (await query<{ id: string }>('select id from webhook_deliveries where endpoint_id = ? order by id', [e])).map((r) => r.id),
    [ids[2], ids[4]],
    'kept: the newest (pending: never purged) and a failed one made since failedSince; purged: the rest past the one kept',
  );
  // Another test's workspace may share the shard: what went is at least this workspace's, whose rows are checked above.
  t.ok(purged.deliveries >= 3, `its three deliveries among those counted (${purged.deliveries})`);
  t.same(
    (await query<{ id: string }>('select id from webhook_endpoints where workspace_id = ? order by id', [a])).map((r) => r.id),
    [e, recent],
    'an endpoint deleted before deletedBefore is purged',
  );
  t.ok(purged.endpoints >= 1);
  t.same(
    (await query<{ id: string }>('select id from webhook_events where workspace_id = ?', [a])).map((r) => r.id),
    [`evt_${a}_new`],
  );
  t.ok(purged.events >= 1);
  t.same(
    (await query<{ idempotency_key: string }>('select idempotency_key from webhook_recoveries where endpoint_id = ?', [e])).map((r) => r.idempotency_key),
    ['new'],
  );
  // Without shards (a single node): every workspace's.
  const b = await workspace();
  const eb = await endpoint(b, `whe_${b}`, []);
  await pending(b, eb, [`dlv_${b}_1`, `dlv_${b}_2`]);
  for (const id of [`dlv_${b}_1`, `dlv_${b}_2`]) await deliveries.writeDeliveryFinal(db.em(), id, { status: 'delivered', attempts: [attempt(1, 200)] }, AT);
  const everyone = await purgeWebhookHistory(db, purge);
  t.same(
    (await query<{ id: string }>('select id from webhook_deliveries where endpoint_id = ?', [eb])).map((r) => r.id),
    [`dlv_${b}_2`],
    "without shards: any workspace's",
  );
  t.ok(everyone.deliveries >= 1);
});

t.test('endpoints: made, read and listed while not deleted, changed, disabled, rotated, deleted; who is subscribed', async (t) => {
  const a = await workspace();
  const row = (id: string, createdAt: Date, more: Partial<WebhookEndpointRow> = {}): WebhookEndpointRow => ({
    id,
    workspaceId: a,
    url: `https://example.com/${id}`,
    description: null,
    eventTypes: ['generation.succeeded'],
    status: 'active',
    secretSealed: `sealed-${id}`,
    signatureScheme: 'standard',
    previousSecretSealed: null,
    previousSecretExpiresAt: null,
    createdAt,
    updatedAt: createdAt,
    deletedAt: null,
    disabledReason: null,
    failingSince: null,
    consecutiveExpired: 0,
    ...more,
  });
  const ids = [1, 2, 3, 4].map((n) => `whe_${a}_${n}`);
  // Made out of order, so that the pages' order is the statement's, not the rows' place in the table.
  await endpoints.insertEndpoint(openUnit(db), row(ids[1]!, ms(1_000), { eventTypes: ['generation.succeeded', 'generation.started'] }));
  await endpoints.insertEndpoint(openUnit(db), row(ids[0]!, ms(0)));
  await endpoints.insertEndpoint(openUnit(db), row(ids[2]!, ms(1_000), { eventTypes: ['generation.failed'] }));
  await endpoints.insertEndpoint(openUnit(db), row(ids[3]!, ms(2_000)));
  t.same(await endpoints.findLiveEndpoint(db, ids[0]!), row(ids[0]!, ms(0)), 'read as written');
  t.equal((await endpoints.findLiveEndpointIn(openUnit(db), ids[1]!))?.id, ids[1]);
  t.equal(await endpoints.countLiveEndpoints(openUnit(db), a), 4);

  await endpoints.writeEndpointDeleted(db.em(), ids[3]!, ms(5_000));
  const [deleted] = await query<{ secret_sealed: string; deleted: boolean }>(
    'select secret_sealed, deleted_at is not null as deleted from webhook_endpoints where id = ?',
    [ids[3]],
  );
  t.same(deleted, { secret_sealed: '', deleted: true }, 'deleted: its secret wiped, the row kept');
  t.equal(await endpoints.findLiveEndpoint(db, ids[3]!), null);
  t.equal(await endpoints.findLiveEndpointIn(openUnit(db), ids[3]!), null);
  t.equal(await endpoints.countLiveEndpoints(openUnit(db), a), 3);
  await endpoints.writeEndpointDeleted(db.em(), ids[3]!, ms(9_000));
  const [again] = await query<{ at: string }>(
    `select to_char(deleted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at from webhook_endpoints where id = ?`,
    [ids[3]],
  );
  t.equal(again?.at, ms(5_000).toISOString(), 'deleted twice: the first time stands');

  const page = async (after?: [Date, string], limit = 10) => (await endpoints.listEndpoints(openUnit(db), a, { after, limit })).map((e) => e.id);
  const tie = [ids[1]!, ids[2]!].sort().reverse();
  t.same(await page(), [...tie, ids[0]], 'newest first, deleted left out, a tie by id descending');
  t.same(await page(undefined, 1), [tie[0]]);
  t.same(await page([ms(1_000), tie[0]!]), [tie[1], ids[0]], 'after a cursor, through the tie');
  t.same(await endpoints.listEndpoints(openUnit(db), 'ws_other', { limit: 10 }), []);

  t.same(await endpoints.subscribedEndpoints(db.em(), a, 'generation.succeeded'), [ids[0], ids[1]].sort(), 'active, live, subscribed, in id order');
  t.same(await endpoints.subscribedEndpoints(db.em(), a, 'generation.succeeded', ids[0]), [ids[1]], 'but one');
  t.same(
    (
      await endpoints.countSubscribed(db.em(), [
        { workspace_id: a, event_type: 'generation.succeeded' },
        { workspace_id: a, event_type: 'generation.failed' },
        { workspace_id: a, event_type: 'generation.expired' },
      ])
    )
      .map((c) => [c.event_type, Number(c.n)])
      .sort(),
    [
      ['generation.failed', 1],
      ['generation.succeeded', 2],
    ],
    'pairs with none left out',
  );
  t.same(
    (await endpoints.countStartedSubscribers(db.em(), [a, 'ws_other'])).map((c) => [c.workspace_id, Number(c.n)]),
    [[a, 1]],
  );

  await endpoints.writeEndpointHealth(db.em(), ids[0]!, { failingSince: ms(100).getTime(), consecutiveExpired: 2 });
  let read = (await endpoints.findLiveEndpoint(db, ids[0]!))!;
  t.same([read.failingSince?.getTime(), read.consecutiveExpired], [ms(100).getTime(), 2]);
  await endpoints.writeEndpointHealth(db.em(), ids[0]!, { failingSince: undefined, consecutiveExpired: 0 });
  read = (await endpoints.findLiveEndpoint(db, ids[0]!))!;
  t.same([read.failingSince, read.consecutiveExpired], [null, 0], 'after a success');

  await endpoints.writeEndpointDisabled(db.em(), ids[0]!, 'failing for 5 days', { failingSince: ms(100).getTime(), consecutiveExpired: 7 }, ms(6_000));
  read = (await endpoints.findLiveEndpoint(db, ids[0]!))!;
  t.same(
    [read.status, read.disabledReason, read.failingSince?.getTime(), read.consecutiveExpired, read.updatedAt.getTime()],
    ['disabled', 'failing for 5 days', ms(100).getTime(), 7, ms(6_000).getTime()],
  );
  t.same(await endpoints.subscribedEndpoints(db.em(), a, 'generation.succeeded'), [ids[1]], 'a disabled one is not subscribed');

  const next: endpoints.EndpointChange = {
    url: 'https://example.com/changed',
    description: 'changed',
    eventTypes: ['generation.failed'],
    status: 'active',
    signatureScheme: 'x-service',
    secretSealed: 'sealed-new',
    previousSecretSealed: 'sealed-old',
    previousSecretExpiresAt: ms(86_400_000),
    disabledReason: null,
    failingSince: null,
    consecutiveExpired: 0,
  };
  await endpoints.writeEndpointChange(db.em(), ids[0]!, next, ms(7_000));
  read = (await endpoints.findLiveEndpoint(db, ids[0]!))!;
  t.same(
    {
      url: read.url,
      description: read.description,
      eventTypes: read.eventTypes,
      status: read.status,
      signatureScheme: read.signatureScheme,
      secretSealed: read.secretSealed,
      previousSecretSealed: read.previousSecretSealed,
      previousSecretExpiresAt: read.previousSecretExpiresAt,
      disabledReason: read.disabledReason,
      failingSince: read.failingSince,
      consecutiveExpired: read.consecutiveExpired,
    },
    next,
  );
  t.equal(read.updatedAt.getTime(), ms(7_000).getTime());
  await endpoints.writeEndpointSecrets(db.em(), ids[1]!, { secretSealed: 's2', previousSecretSealed: 's1', previousSecretExpiresAt: ms(1) }, ms(8_000));
  read = (await endpoints.findLiveEndpoint(db, ids[1]!))!;
  t.same(
    [read.secretSealed, read.previousSecretSealed, read.previousSecretExpiresAt?.getTime(), read.updatedAt.getTime()],
    ['s2', 's1', ms(1).getTime(), ms(8_000).getTime()],
  );

  // A deleted endpoint is changed by none of them.
  await endpoints.writeEndpointChange(db.em(), ids[3]!, next, ms(9_000));
  await endpoints.writeEndpointSecrets(db.em(), ids[3]!, { secretSealed: 'x', previousSecretSealed: null, previousSecretExpiresAt: null }, ms(9_000));
  await endpoints.writeEndpointDisabled(db.em(), ids[3]!, 'x', { failingSince: undefined, consecutiveExpired: 0 }, ms(9_000));
  const [still] = await query<{ url: string; secret_sealed: string; status: string }>('select url, secret_sealed, status from webhook_endpoints where id = ?', [
    ids[3],
  ]);
  t.same(still, { url: `https://example.com/${ids[3]}`, secret_sealed: '', status: 'active' });
});
