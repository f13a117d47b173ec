import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';
import { counterBehavior, withCounters } from '../fixtures/counter-actor.ts';
import { createEndpoint, createGeneration, eventually, startReceiver, tenant } from '../webhooks/support.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (no escapes in our label values). */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** Sum of the samples of `name` whose labels include `labels`; undefined when there is none. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const matching = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return matching.length === 0 ? undefined : matching.reduce((sum, s) => sum + s.value, 0);
}

async function scrape(server: TestServer): Promise<Sample[]> {
  if (!server.metricsUrl) throw new Error('the metrics endpoint is off');
  const response = await fetch(server.metricsUrl);
  if (response.status !== 200) throw new Error(`GET /metrics answered ${response.status}`);
  return parse(await response.text());
}

async function statusOf(server: TestServer, table: 'generations' | 'webhook_deliveries', column: string, id: string): Promise<string | undefined> {
  const rows = await server.services.db.em().execute<Array<{ status: string }>>(`select status from ${table} where ${column} = ?`, [id]);
  return rows[0]?.status;
}

t.test('after a whole flow, every metric has moved: requests, actors, generations, provider, webhooks, commits, pool, rate limit, process', async (t) => {
  const counter = counterBehavior('counter');
  // The job stays with the provider for a moment (the gauge of running jobs is seen), the key's limit is low
  // enough to reach, and the receiver is on loopback.
  const server = await startTestServer(t, {
    behaviors: [counter.behavior],
    env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '1500', RATE_LIMIT_FREE: '20' },
  });
  await server.recovered;
  const before = await scrape(server);
  const receiver = await startReceiver(t);
  // The first delivery is held: the pending-deliveries gauge shows it meanwhile.
  receiver.behave((index) => (index === 0 ? { hold: true } : { status: 200 }));

  const who = await tenant(server);
  await createEndpoint(server, who, receiver.url);
  const created = await createGeneration(server, who, 'Say hello');
  await eventually(async () => {
    const samples = await scrape(server);
    return (value(samples, 'gs_generations', { generation_status: 'running' }) ?? 0) +
      (value(samples, 'gs_generations', { generation_status: 'submitted' }) ?? 0) >=
      1
      ? true
      : undefined;
  }, 'the generations gauge shows the job with the provider');
  await eventually(async () => ((await statusOf(server, 'generations', 'id', created.id)) === 'succeeded' ? true : undefined), 'the generation succeeds');
  await receiver.waitFor(1);
  const whilePending = await eventually(async () => {
    const samples = await scrape(server);
    return (value(samples, 'gs_webhook_deliveries_pending') ?? 0) >= 1 ? samples : undefined;
  }, 'the pending-deliveries gauge shows the held delivery');
  t.ok(value(whilePending, 'gs_webhook_deliveries_pending')! >= 1, 'deliveries pending while the receiver holds the first');
  receiver.held[0]!.release(200);
  await eventually(
    async () => ((await statusOf(server, 'webhook_deliveries', 'generation_id', created.id)) === 'delivered' ? true : undefined),
    'the delivery is delivered',
  );

  // Mailbox depth: three messages for one actor that holds the first.
  let release!: () => void;
  const hold = new Promise<void>((resolve) => {
    release = resolve;
  });
  const asks = [1, 2, 3].map(() => withCounters(server.services.actors).ask('counter', 'c1', { type: 'hold', wait: hold }));
  const busy = await scrape(server);
  t.equal(value(busy, 'gs_actor_mailbox_depth', { actor_kind: 'counter' }), 3, 'mailbox depth by kind: the message handled and the two waiting');
  t.equal(value(busy, 'gs_actor_live', { actor_kind: 'counter' }), 1, 'live actors by kind');
  release();
  await Promise.all(asks);

  // The key's limit (20 a minute) is reached: the next requests are refused with 429.
  let refused = 0;
  for (let i = 0; i < 40 && refused === 0; i++) {
    const response = await server.fetch(`/v1/generations/${created.id}`, { headers: withKey(who.key) });
    await response.arrayBuffer();
    if (response.status === 429) refused++;
  }
  t.equal(refused, 1, 'a request was refused by the rate limit');

  const after = await scrape(server);
  const moved = (name: string, labels: Record<string, string> = {}) => (value(after, name, labels) ?? 0) - (value(before, name, labels) ?? 0);
  t.ok(
    moved('http_server_request_duration_count', { http_request_method: 'POST', http_route: '/v1/generations', http_response_status_code: '201' }) >= 1,
    'HTTP requests by route, method and status',
  );
  t.ok(moved('http_server_request_duration_bucket', { http_route: '/v1/generations', le: '+Inf' }) >= 1, 'with a duration histogram');
  t.ok(
    moved('http_server_request_duration_count', { http_route: '/v1/generations/:id', http_response_status_code: '429' }) >= 1,
    'the refusal by its route template, not its URL',
  );
  t.notOk(
    after.some((s) => s.labels.http_route?.includes(created.id)),
    'no series carries a URL with an id',
  );
  t.ok(moved('gs_rate_limit_refusals_total', { http_route: '/v1/generations/:id' }) >= 1, 'rate-limit refusals');
  for (const kind of ['ws', 'gen', 'whk', 'counter']) {
    t.ok(moved('gs_actor_message_duration_count', { actor_kind: kind }) >= 1, `actor messages of kind ${kind}, with their processing time`);
  }
  t.ok(moved('gs_actor_passivations_total', { actor_kind: 'gen' }) >= 1, 'a finished generation actor was passivated');
  t.ok((value(after, 'gs_actor_live', { actor_kind: 'ws' }) ?? 0) >= 1, 'the workspace actor is live');
  t.ok(moved('gs_generation_transitions_total', { generation_status_from: 'new', generation_status_to: 'queued' }) >= 1, 'transition: created');
  t.ok(moved('gs_generation_transitions_total', { generation_status_to: 'succeeded' }) >= 1, 'transition: succeeded');
  t.equal(value(after, 'gs_generations', { generation_status: 'running' }), 0, 'the gauge is back to 0 once the job finished');
  t.ok(
    moved('gs_provider_call_duration_count', { gs_provider: 'local', gs_outcome: 'succeeded' }) >= 1,
    'provider calls by provider and outcome, with their duration',
  );
  t.ok((value(after, 'gs_provider_call_duration_sum', { gs_provider: 'local' }) ?? 0) >= 1, 'the provider call lasted the provider latency');
  t.ok(moved('gs_webhook_attempt_duration_count', { gs_outcome: 'success' }) >= 1, 'webhook attempts by outcome, with their duration');
  t.equal(value(after, 'gs_webhook_deliveries_pending'), 0, 'no delivery pending at the end');
  t.ok(moved('gs_db_batch_size_count') >= 1, 'group-commit batch sizes');
  t.ok(moved('gs_db_commit_duration_count') >= 1, 'group-commit latency');
  t.ok((value(after, 'db_client_connection_count') ?? 0) >= 1, 'the database pool, used and idle connections');
  t.equal(value(after, 'gs_db_available'), 1, 'the database reachable from this node');
  t.not(value(after, 'db_client_connection_count', { db_client_connection_state: 'used' }), undefined, 'connections in use');
  t.ok(moved('process_cpu_time_total') > 0, 'process CPU time');
  t.ok((value(after, 'process_memory_usage') ?? 0) > 0, 'process memory');
  t.not(value(after, 'nodejs_eventloop_delay_p99'), undefined, 'event-loop delay');
});

t.test('metrics are not on the API port: a user key cannot read them', async (t) => {
  const server = await startTestServer(t);
  const who = await tenant(server);
  const onApi = await server.json('/metrics', { headers: withKey(who.key) });
  t.equal(onApi.status, 404, 'GET /metrics on the API answers 404, with a key too');
  t.equal(onApi.body.error.code, 'not_found');
  const v1 = await server.json('/v1/metrics', { headers: withKey(who.key) });
  t.equal(v1.status, 404);
  t.not(new URL(server.metricsUrl!).port, String(server.port), 'the metrics listener has a port of its own');
  const other = await fetch(new URL('/v1', server.metricsUrl!));
  t.equal(other.status, 404, 'the metrics listener serves GET /metrics only');
  await other.arrayBuffer();
});

t.test('OTEL_METRICS_EXPORTER=none: no listener, no instruments', async (t) => {
  const server = await startTestServer(t, { env: { OTEL_METRICS_EXPORTER: 'none' } });
  t.equal(server.metricsUrl, undefined);
  t.equal(server.services.metrics, undefined);
  t.equal((await server.json('/v1')).status, 200);
});

t.test('OTLP: metrics are pushed to OTEL_EXPORTER_OTLP_METRICS_ENDPOINT', async (t) => {
  const bodies: any[] = [];
  let wake: (() => void) | undefined;
  const collector = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/metrics' && req.method === 'POST') bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      wake?.();
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        collector.closeAllConnections();
        collector.close(() => resolve());
      }),
  );
  const server = await startTestServer(t, {
    env: {
      OTEL_METRICS_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}/v1/metrics`,
      OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
      OTEL_METRIC_EXPORT_INTERVAL: '200',
      OTEL_METRIC_EXPORT_TIMEOUT: '200',
    },
  });
  t.equal(server.metricsUrl, undefined, 'OTLP alone: no scrape listener');
  t.equal((await server.json('/v1')).status, 200);
  const names = await eventually(async () => {
    const seen = new Set<string>();
    for (const body of bodies)
      for (const rm of body.resourceMetrics ?? []) for (const sm of rm.scopeMetrics ?? []) for (const m of sm.metrics ?? []) seen.add(m.name);
    return seen.has('http.server.request.duration') ? seen : undefined;
  }, 'the collector receives the request histogram');
  t.ok(names.has('process.cpu.time'));
  const resource = bodies[0].resourceMetrics[0].resource.attributes as Array<{ key: string; value: { stringValue?: string } }>;
  t.equal(resource.find((a) => a.key === 'service.name')?.value.stringValue, 'generation-service');
});

t.test('GET /health/live answers while the process runs, and is in the OpenAPI document', async (t) => {
  const server = await startTestServer(t);
  const live = await server.json('/health/live');
  t.equal(live.status, 200);
  t.same(live.body, { status: 'live' });
  t.match(live.headers.get('content-type'), /^application\/json/);
  const openapi = await server.json('/v1/openapi.json');
  t.ok(openapi.body.paths['/health/live']?.get, 'documented');
  t.equal(openapi.body.paths['/health/live'].get.operationId, 'getLiveness');
});
