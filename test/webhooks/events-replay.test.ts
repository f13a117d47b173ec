import t from 'tap';
import type { TestServer } from '../helpers/server.ts';
import { call, isError } from '../identity/support.ts';
import { EVENT_RETENTION_MS } from '../../actors/webhook/events.ts';
import { pruneDeliveries } from '../../actors/webhook/retention.ts';
import { cancelledEvent, createEndpoint, historyWhen, startOnManualClock, startReceiver, tenant, type Tenant } from './support.ts';

const events = (server: TestServer, who: Tenant, query = '') => call(server, who.key, 'GET', `/v1/events?workspaceId=${who.workspaceId}${query}`);

t.test('every terminal event is kept, with or without an endpoint, and listed newest first by type and date with a cursor', async (t) => {
  const { clock, server, who } = await startOnManualClock(t);
  const firstAt = clock.now();
  const first = await cancelledEvent(server, who);
  clock.advance(60_000);
  const middle = clock.now();
  const second = await cancelledEvent(server, who);
  clock.advance(60_000);
  const third = await cancelledEvent(server, who);

  const all = await events(server, who);
  t.equal(all.status, 200, JSON.stringify(all.body));
  t.same(
    all.body.data.map((e: any) => e.generationId),
    [third, second, first],
    'newest first',
  );
  t.match(all.body.data[0], { id: /^evt_/, event: 'generation.cancelled', workspaceId: who.workspaceId, data: { generationId: third, status: 'cancelled' } });
  t.equal(all.body.nextCursor, null);

  const page1 = await events(server, who, '&limit=2');
  t.equal(page1.body.data.length, 2);
  const page2 = await events(server, who, `&limit=2&cursor=${page1.body.nextCursor}`);
  t.same(
    page2.body.data.map((e: any) => e.generationId),
    [first],
  );
  t.equal(page2.body.nextCursor, null);

  t.same(
    (await events(server, who, `&from=${new Date(middle).toISOString()}`)).body.data.map((e: any) => e.generationId),
    [third, second],
    'from, included',
  );
  t.same(
    (await events(server, who, `&to=${new Date(middle).toISOString()}`)).body.data.map((e: any) => e.generationId),
    [first],
    'to, excluded',
  );
  t.same((await events(server, who, '&type=generation.completed')).body.data, [], 'by type');
  t.equal((await events(server, who, '&type=generation.cancelled')).body.data.length, 3);

  isError(t, await events(server, who, '&type=generation.unknown'), 400, 'validation_error', 'an unknown type');
  isError(t, await events(server, who, '&from=yesterday'), 400, 'validation_error', 'a date that is not one');
  isError(t, await events(server, who, '&cursor=forged'), 400, 'validation_error', 'a forged cursor');
  const stranger = await tenant(server);
  t.same((await events(server, stranger)).body.data, [], 'another workspace sees none of them');
  isError(t, await call(server, stranger.key, 'GET', `/v1/events?workspaceId=${who.workspaceId}`), 403, 'forbidden', 'a key naming another workspace');

  // Kept EVENT_RETENTION_MS, then pruned by the retention job.
  await pruneDeliveries(server.services.db, firstAt + EVENT_RETENTION_MS - 1);
  t.equal((await events(server, who)).body.data.length, 3, 'kept within the retention');
  await pruneDeliveries(server.services.db, clock.now() + EVENT_RETENTION_MS + 1);
  t.same((await events(server, who)).body.data, [], 'gone after it');
});

t.test('replay: an event sent to an endpoint made after it; to one that had it, with the id it saw', async (t) => {
  const { server, who } = await startOnManualClock(t);
  const receiver = await startReceiver(t);
  const early = await createEndpoint(server, who, receiver.url);
  const generation = await cancelledEvent(server, who);
  const [firstSeen] = await receiver.waitFor(1);
  const [event] = (await events(server, who)).body.data;
  t.equal(event.generationId, generation);

  const late = await createEndpoint(server, who, receiver.url);
  const replay = (endpoint: string, eventId: string, who2: Tenant = who) =>
    call(server, who2.key, 'POST', `/v1/webhooks/${endpoint}/replay`, { workspaceId: who2.workspaceId, eventId });
  const toLate = await replay(late.id, event.id);
  t.equal(toLate.status, 201, JSON.stringify(toLate.body));
  t.match(toLate.body, { endpointId: late.id, eventId: event.id, resendOf: null, event: 'generation.cancelled', generationId: generation });
  const [, got] = await receiver.waitFor(2);
  t.equal(got!.body.id, toLate.body.id, 'a first delivery: its own id');
  t.equal(got!.headers['x-service-delivery'], toLate.body.id);
  t.same(got!.body.data, firstSeen!.body.data, 'the same event data');
  t.equal(got!.body.createdAt, firstSeen!.body.createdAt);

  const toEarly = await replay(early.id, event.id);
  t.equal(toEarly.status, 201);
  t.match(toEarly.body, { eventId: event.id, resendOf: firstSeen!.body.id });
  const [, , again] = await receiver.waitFor(3);
  t.equal(again!.rawBody.toString(), firstSeen!.rawBody.toString(), 'the endpoint that had it gets the very body, id included');
  await historyWhen(server, who, late.id, (d) => d[0]?.status === 'delivered', 'delivered');

  isError(t, await replay(late.id, 'evt_missing'), 404, 'not_found', 'an unknown event');
  const stranger = await tenant(server);
  await cancelledEvent(server, stranger);
  const [foreign] = (await events(server, stranger)).body.data;
  isError(t, await replay(late.id, foreign.id), 404, 'not_found', "another workspace's event");
  isError(t, await replay(late.id, event.id, stranger), 404, 'not_found', "another workspace's endpoint");
  const narrow = await createEndpoint(server, who, receiver.url, ['generation.completed']);
  isError(t, await replay(narrow.id, event.id), 409, 'conflict', /does not subscribe/);
  await call(server, who.key, 'PATCH', `/v1/webhooks/${late.id}`, { workspaceId: who.workspaceId, status: 'disabled' });
  isError(t, await replay(late.id, event.id), 409, 'conflict', /disabled/);
  isError(
    t,
    await call(server, who.key, 'POST', `/v1/webhooks/${early.id}/replay`, { workspaceId: who.workspaceId }),
    400,
    'validation_error',
    'eventId is required',
  );
});
