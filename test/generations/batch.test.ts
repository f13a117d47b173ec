import t from 'tap';
import { sharedTestServer, startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { setPlan } from './support.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from './flow.ts';

const ENV = { LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_FREE: '100000', RATE_LIMIT_TEAM: '100000' };
const text = (prompt: string, extra: Record<string, unknown> = {}) => ({ mode: 'text_to_text', model: 'local/text-mini', params: { prompt }, ...extra });

function batch(server: TestServer, credential: { key?: string; cookie?: string }, body: unknown) {
  const headers = credential.key ? withKey(credential.key) : withCookie(credential.cookie!, { 'content-type': 'application/json' });
  return server.json('/v1/generations/batch', { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

async function count(server: TestServer, sql: string, params: unknown[]): Promise<number> {
  const rows = await serverQuery(server)<{ n: string }>(sql, params);
  return Number(rows[0]!.n);
}

const generationsOf = (server: TestServer, workspaceId: string) =>
  count(server, 'select count(*)::int8 as n from generations where workspace_id = ?', [workspaceId]);
const reservesOf = (server: TestServer, workspaceId: string) =>
  count(server, `select count(*)::int8 as n from credit_ledger where workspace_id = ? and kind = 'reserve'`, [workspaceId]);

t.test('a batch creates every item; each job runs to succeeded with one reserve and one capture', async (t) => {
  const server = await sharedTestServer(ENV);
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'team');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);

  const items = [
    text('one'),
    { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'a kite', numImages: 2 }, project: 'kites' },
    text('three', { paymentMode: 'credits' }),
  ];
  const res = await batch(server, { key }, { workspaceId: user.workspaceId, items });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.match(res.body, { created: 3, replayed: 0, refused: 0 });
  t.same(
    res.body.results.map((r: any) => [r.status, r.replayed]),
    [
      [201, false],
      [201, false],
      [201, false],
    ],
  );
  const gens = res.body.results.map((r: any) => r.body);
  t.same(
    gens.map((g: any) => g.modelId),
    ['local/text-mini', 'local/image-fast', 'local/text-mini'],
    'results in item order',
  );
  t.equal(gens[1].project, 'kites');
  t.equal(gens[1].credits, 8, 'priced as a single create prices it');
  t.ok(gens.every((g: any) => g.workspaceId === user.workspaceId && g.status === 'queued'));
  t.same(
    [...gens.map((g: any) => g.id)].sort(),
    gens.map((g: any) => g.id),
    'ids increase in item order',
  );
  t.equal(res.headers.get('x-ratelimit-limit'), '100000', 'a keyed batch carries the rate-limit headers');

  for (const g of gens) {
    const done = await waitFor(server, key, user.workspaceId, g.id, isTerminal, 'a terminal state');
    t.equal(done.status, 'succeeded', `${g.id} succeeded`);
  }
  const query = serverQuery(server);
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  for (const g of gens) t.same(ledger[g.id], { reserve: 1, capture: 1 }, `${g.id}: one reserve, one capture`);
  const money = await moneyOf(query, user.workspaceId);
  t.equal(money.available, 12_000 - 1 - 8 - 1, 'ten credits spent');
  t.equal(money.ledgerAvailable, money.available, 'the balance equals its ledger');
  t.equal(money.reserved, 0);
  t.same(money.reservations, []);

  // A full batch of 100, each item its own generation.
  const full = await batch(server, { key }, { workspaceId: user.workspaceId, items: Array.from({ length: 100 }, (_, i) => text(`job ${i}`)) });
  t.equal(full.status, 200);
  t.match(full.body, { created: 100, refused: 0 });
  t.equal(new Set(full.body.results.map((r: any) => r.body.id)).size, 100, '100 distinct generations');
  t.equal(await generationsOf(server, user.workspaceId), 103);
  t.equal(await reservesOf(server, user.workspaceId), 103, 'one reserve per generation');

  // A session (dashboard) may create a batch too.
  const bySession = await batch(server, { cookie: user.cookie }, { workspaceId: user.workspaceId, items: [text('from the dashboard')] });
  t.equal(bySession.status, 200, JSON.stringify(bySession.body));
  t.equal(bySession.body.results[0].status, 201);
});

t.test('items are refused on their own: validation, unknown model, plan, credits; the others are created', async (t) => {
  const server = await sharedTestServer(ENV);
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  // The free plan opens with 100 credits; image-fast with four images costs 16.
  const four = { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'x', numImages: 4 } };
  const items = [
    text('ok'), // 1 credit: 99 left
    { ...text('bad'), colour: 'red' }, // unknown field
    { mode: 'text_to_text', model: 'local/nope', params: { prompt: 'x' } }, // unknown model
    { mode: 'text_to_image', model: 'local/text-mini', params: { prompt: 'x' } }, // model of another mode
    { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'x', temperature: 'hot' } }, // params against the model's schema
    42, // not an object
    { ...text('elsewhere'), workspaceId: 'ws_someone_else' }, // an item cannot name a workspace
    { ...text('x'), idempotencyKey: 'has a space' }, // a key of 1 to 255 visible characters
    text('pro', { model: 'local/text-pro' }), // a paid model on the free plan
    four,
    four,
    four,
    four,
    four,
    four, // 96 credits: 3 left
    four, // 16 credits: refused
    text('still fits'), // 1 credit: accepted after a refused item
  ];
  const res = await batch(server, { key }, { workspaceId: user.workspaceId, items });
  t.equal(res.status, 200, JSON.stringify(res.body));
  const summary = res.body.results.map((r: any) => (r.status === 201 ? 201 : `${r.status} ${r.body.error.code}`));
  t.same(summary, [
    201,
    '400 validation_error',
    '400 validation_error',
    '400 validation_error',
    '400 validation_error',
    '400 validation_error',
    '400 validation_error',
    '400 validation_error',
    '422 plan_limit_reached',
    201,
    201,
    201,
    201,
    201,
    201,
    '402 insufficient_credits',
    201,
  ]);
  t.match(res.body, { created: 8, replayed: 0, refused: 9 });
  const messages = res.body.results.map((r: any) => r.body.error?.message ?? '');
  t.match(messages[1], /^items\.1: unknown field "colour"/);
  t.match(messages[2], /^items\.2\.model: unknown model "local\/nope"/);
  t.match(messages[3], /^items\.3\.mode:/);
  t.match(messages[4], /^items\.4\.params\.temperature/);
  t.match(messages[5], /^items\.5: must be object/);
  t.match(messages[6], /^items\.6: unknown field "workspaceId"/);
  t.match(messages[7], /^items\.7\.idempotencyKey:/);
  for (const r of res.body.results.filter((r: any) => r.status !== 201)) {
    t.same(Object.keys(r.body), ['error'], 'a refusal is the error envelope');
    t.equal(r.body.error.requestId, res.headers.get('x-request-id'), "with the batch request's id");
  }

  t.equal(await generationsOf(server, user.workspaceId), 8, 'refused items made no generation');
  t.equal(await reservesOf(server, user.workspaceId), 8, 'and reserved nothing');
  // The accepted jobs run at once (zero provider latency): the money is read once each has settled.
  for (const r of res.body.results.filter((r: any) => r.status === 201)) await waitFor(server, key, user.workspaceId, r.body.id, isTerminal);
  const money = await moneyOf(serverQuery(server), user.workspaceId);
  t.equal(
    money.available + money.reserved,
    100 -
      (await count(server, `select coalesce(sum(-reserved_credits), 0)::int8 as n from credit_ledger where workspace_id = ? and kind = 'capture'`, [
        user.workspaceId,
      ])),
    'nothing taken beyond the accepted jobs',
  );
  t.equal(money.ledgerAvailable, money.available);
  t.equal(money.ledgerReserved, money.reserved);

  // Every item refused: still 200, each with its error.
  const none = await batch(server, { key }, { workspaceId: user.workspaceId, items: [{ mode: 'text_to_text', model: 'local/nope' }, 7] });
  t.equal(none.status, 200);
  t.match(none.body, { created: 0, replayed: 0, refused: 2 });
});

t.test('the unfinished-job cap applies per item', async (t) => {
  const server = await startTestServer(t, { env: { ...ENV, LOCAL_PROVIDER_LATENCY_MS: '60000' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write']);
  // The free plan runs 2 jobs and holds 20 unfinished.
  const res = await batch(server, { key }, { workspaceId: user.workspaceId, items: Array.from({ length: 25 }, (_, i) => text(`cap ${i}`)) });
  t.equal(res.status, 200);
  t.same(
    res.body.results.map((r: any) => r.status),
    [...Array(20).fill(201), ...Array(5).fill(422)],
  );
  t.ok(res.body.results.slice(20).every((r: any) => r.body.error.code === 'plan_limit_reached'));
  t.equal(await generationsOf(server, user.workspaceId), 20);
});

t.test('idempotency per item: replay, conflict, the same key twice in one batch, and the same key as the single create', async (t) => {
  const server = await sharedTestServer(ENV);
  const user = await signUp(server);
  const other = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const { key: otherKey } = await createKey(server, other.cookie, other.workspaceId, ['generations.write']);
  const keyed = (workspaceId: string, idempotencyKey: string) =>
    count(server, 'select count(*)::int8 as n from generations where workspace_id = ? and idempotency_key = ?', [workspaceId, idempotencyKey]);

  const items = [text('a', { idempotencyKey: 'k-a' }), text('b', { idempotencyKey: 'k-b' }), text('no key')];
  const first = await batch(server, { key }, { workspaceId: user.workspaceId, items });
  t.equal(first.status, 200);
  t.match(first.body, { created: 3, replayed: 0 });
  const again = await batch(server, { key }, { workspaceId: user.workspaceId, items });
  t.match(again.body, { created: 1, replayed: 2, refused: 0 }, 'the keyed items replay; the unkeyed one is new');
  t.same(
    again.body.results.map((r: any) => r.replayed),
    [true, true, false],
  );
  t.same(again.body.results[0].body, first.body.results[0].body, 'the first answer again');
  t.same(again.body.results[1].body, first.body.results[1].body);
  t.not(again.body.results[2].body.id, first.body.results[2].body.id);
  t.equal(await keyed(user.workspaceId, 'k-a'), 1);
  t.equal(await reservesOf(server, user.workspaceId), 4, 'credits reserved once per job');

  // The same key with another request: 409 for that item, the rest of the batch goes on.
  const conflict = await batch(
    server,
    { key },
    { workspaceId: user.workspaceId, items: [text('a changed', { idempotencyKey: 'k-a' }), text('fresh', { idempotencyKey: 'k-c' })] },
  );
  t.same(
    conflict.body.results.map((r: any) => r.status),
    [409, 201],
  );
  t.equal(conflict.body.results[0].body.error.code, 'conflict');
  t.match(conflict.body.results[0].body.error.message, /different request body/);
  t.equal(await keyed(user.workspaceId, 'k-a'), 1);

  // The same key twice in one batch: the same request is the first item's answer again, another is a conflict.
  const twice = await batch(
    server,
    { key },
    {
      workspaceId: user.workspaceId,
      items: [text('dup', { idempotencyKey: 'k-d' }), text('dup', { idempotencyKey: 'k-d' }), text('not dup', { idempotencyKey: 'k-d' })],
    },
  );
  t.same(
    twice.body.results.map((r: any) => [r.status, r.replayed]),
    [
      [201, false],
      [201, true],
      [409, undefined],
    ],
  );
  t.equal(twice.body.results[1].body.id, twice.body.results[0].body.id, 'one generation for both');
  t.match(twice.body.results[2].body.error.message, /different request body/);
  t.equal(await keyed(user.workspaceId, 'k-d'), 1);
  const retried = await batch(
    server,
    { key },
    {
      workspaceId: user.workspaceId,
      items: [text('dup', { idempotencyKey: 'k-d' }), text('dup', { idempotencyKey: 'k-d' }), text('not dup', { idempotencyKey: 'k-d' })],
    },
  );
  t.same(
    retried.body.results.map((r: any) => [r.status, r.replayed]),
    [
      [201, true],
      [201, true],
      [409, undefined],
    ],
    'the retried batch answers alike',
  );

  // One key space with POST /v1/generations: a batch item is the single create of {workspaceId, ...item}.
  const single = await createGeneration(server, key, user.workspaceId, text('single'), { 'idempotency-key': 'k-s' });
  t.equal(single.status, 201);
  const asItem = await batch(
    server,
    { key },
    { workspaceId: user.workspaceId, items: [text('single', { idempotencyKey: 'k-s' }), text('other', { idempotencyKey: 'k-s' })] },
  );
  t.same(
    asItem.body.results.map((r: any) => [r.status, r.replayed]),
    [
      [201, true],
      [409, undefined],
    ],
  );
  t.equal(asItem.body.results[0].body.id, single.body.id);
  const back = await createGeneration(server, key, user.workspaceId, text('b'), { 'idempotency-key': 'k-b' });
  t.equal(back.status, 201);
  t.equal(back.headers.get('idempotent-replayed'), 'true', 'a key a batch item used replays through the single create');
  t.equal(back.body.id, first.body.results[1].body.id);

  // Keys are per workspace: the same keys elsewhere are new requests.
  const theirs = await batch(server, { key: otherKey }, { workspaceId: other.workspaceId, items });
  t.match(theirs.body, { created: 3, replayed: 0 });
  t.ok(theirs.body.results.every((r: any) => r.body.workspaceId === other.workspaceId));
});

t.test('request-level limits: item count, body size, shape, the emergency stop', async (t) => {
  const server = await startTestServer(t, { env: { ...ENV, BODY_LIMIT_BYTES: '65536' } });
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'team');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write']);
  const refused = async (label: string, body: unknown, status: number, code: string, message?: RegExp) => {
    const res = await batch(server, { key }, body);
    t.equal(res.status, status, `${label}: ${status}`);
    t.equal(res.body?.error?.code, code, `${label}: ${code}`);
    if (message) t.match(res.body?.error?.message, message, label);
  };
  await refused(
    '101 items',
    { workspaceId: user.workspaceId, items: Array.from({ length: 101 }, (_, i) => text(`${i}`)) },
    400,
    'validation_error',
    /body\.items: must NOT have more than 100 items/,
  );
  await refused('no items', { workspaceId: user.workspaceId, items: [] }, 400, 'validation_error', /body\.items: must NOT have fewer than 1 items/);
  await refused('items missing', { workspaceId: user.workspaceId }, 400, 'validation_error', /body\.items: is required/);
  await refused('items not a list', { workspaceId: user.workspaceId, items: text('x') }, 400, 'validation_error');
  await refused('a field beside items', { workspaceId: user.workspaceId, items: [text('x')], mode: 'text_to_text' }, 400, 'validation_error');
  await refused('not JSON', '{"workspaceId":', 400, 'validation_error');
  await refused(
    'text that cannot be stored in an item',
    `{"workspaceId":"${user.workspaceId}","items":[{"mode":"text_to_text","model":"local/text-mini","params":{"prompt":"nul \\u0000"}}]}`,
    400,
    'validation_error',
    /body\.items\.0\.params\.prompt: must not contain U\+0000/,
  );
  const big = 'p'.repeat(8000);
  await refused('a body over the limit', { workspaceId: user.workspaceId, items: Array.from({ length: 10 }, () => text(big)) }, 413, 'payload_too_large');

  await server.services.switches.setGenerationPaused(true, 'test');
  await refused('the emergency stop', { workspaceId: user.workspaceId, items: [text('x')] }, 503, 'generation_paused');
  await server.services.switches.setGenerationPaused(false);
  t.equal(await generationsOf(server, user.workspaceId), 0, 'no refused request made anything');

  // A batch counts once against the key's rate limit, whatever its size. A key of its own, so that no hit of
  // the requests above leaves the minute's window between the two (on a slow machine it did: -9, not 1).
  const { key: counted } = await createKey(server, user.cookie, user.workspaceId, ['generations.write']);
  const one = await batch(server, { key: counted }, { workspaceId: user.workspaceId, items: Array.from({ length: 50 }, (_, i) => text(`r${i}`)) });
  const two = await batch(server, { key: counted }, { workspaceId: user.workspaceId, items: [text('r')] });
  t.equal(one.status, 200);
  t.equal(Number(one.headers.get('x-ratelimit-remaining')) - Number(two.headers.get('x-ratelimit-remaining')), 1, 'one request, one hit');
});

t.test("tenant isolation: another workspace cannot create in, nor read, a workspace's batch", async (t) => {
  const server = await sharedTestServer(ENV);
  const owner = await signUp(server);
  const stranger = await signUp(server);
  const { key: strangerKey } = await createKey(server, stranger.cookie, stranger.workspaceId, ['all']);
  const { key: ownerKey } = await createKey(server, owner.cookie, owner.workspaceId, ['generations.write', 'generations.read']);

  const byKey = await batch(server, { key: strangerKey }, { workspaceId: owner.workspaceId, items: [text('intrude')] });
  t.equal(byKey.status, 403);
  t.equal(byKey.body.error.code, 'forbidden');
  const bySession = await batch(server, { cookie: stranger.cookie }, { workspaceId: owner.workspaceId, items: [text('intrude')] });
  t.equal(bySession.status, 404, 'a workspace the user is not a member of answers as a missing one');
  t.equal(bySession.body.error.code, 'not_found');
  const missing = await batch(server, { cookie: stranger.cookie }, { workspaceId: 'ws_00000000000000000000000000', items: [text('x')] });
  t.equal(missing.status, 404);
  t.equal(await generationsOf(server, owner.workspaceId), 0, 'nothing made in the workspace');

  const mine = await batch(server, { key: ownerKey }, { workspaceId: owner.workspaceId, items: [text('mine', { idempotencyKey: 'shared' })] });
  const id = mine.body.results[0].body.id;
  const read = await server.json(`/v1/generations/${id}?workspaceId=${stranger.workspaceId}`, { headers: withKey(strangerKey) });
  t.equal(read.status, 404, "another workspace's key cannot read it");
  // The stranger's batch with the same idempotency key makes its own job and learns nothing of the owner's.
  const theirs = await batch(server, { key: strangerKey }, { workspaceId: stranger.workspaceId, items: [text('mine', { idempotencyKey: 'shared' })] });
  t.match(theirs.body.results[0], { status: 201, replayed: false });
  t.not(theirs.body.results[0].body.id, id);
});
