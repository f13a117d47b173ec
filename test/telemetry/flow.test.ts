import t from 'tap';
import { Writable } from 'node:stream';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Type } from '@sinclair/typebox';
import { defineRoute, type RouteDef } from '../../http/route.ts';
import { startTestServer } from '../helpers/server.ts';
import { durableStorage } from '../helpers/database.ts';
import { createEndpoint, createGeneration, eventually, getGeneration, startReceiver, tenant } from '../webhooks/support.ts';

/** A route that fails unexpectedly: the 500 of a server span carries error.type. */
const failingRoute: RouteDef = defineRoute({
  method: 'GET',
  path: '/v1/test/fails',
  operationId: 'testFails',
  summary: 'throws',
  tags: ['test'],
  access: 'public',
  responses: { 200: Type.Object({}) },
  handler: () => {
    throw new TypeError('the probe failed');
  },
});

const byName = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const parentOf = (span: ReadableSpan | undefined) => span?.parentSpanContext?.spanId;
const traceOf = (span: ReadableSpan | undefined) => span?.spanContext().traceId;

/** The spans of a trace as an indented tree (name and kind), children in start order: for reading, and the report. */
function tree(spans: ReadableSpan[], traceId: string): string {
  const inTrace = spans.filter((s) => traceOf(s) === traceId).sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
  const ids = new Set(inTrace.map((s) => s.spanContext().spanId));
  const lines: string[] = [];
  const walk = (parent: string | undefined, depth: number) => {
    for (const span of inTrace.filter((s) => (parent === undefined ? !ids.has(parentOf(s) ?? '') : parentOf(s) === parent))) {
      const links = span.links.length > 0 ? ` (links: ${span.links.length})` : '';
      lines.push(`${'  '.repeat(depth)}${span.name} [${SpanKind[span.kind]}]${links}`);
      walk(span.spanContext().spanId, depth + 1);
    }
  };
  walk(undefined, 0);
  return lines.join('\n');
}

t.test(
  'one whole flow (sign up, key, webhook, generation, delivery): one tree per request, the conventions on every span, no secret in the logs',
  async (t) => {
    const exporter = new InMemorySpanExporter();
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, callback) {
        lines.push(
          ...String(chunk)
            .split('\n')
            .filter((l) => l.trim() !== ''),
        );
        callback();
      },
    });
    // One provider slot, so the second job waits in the queue until the first one frees it.
    const server = await startTestServer(t, {
      spanExporter: exporter,
      logDestination: destination,
      routes: [failingRoute],
      env: { LOG_LEVEL: 'debug', ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '300', LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '1' },
    });
    const receiver = await startReceiver(t);
    const who = await tenant(server);
    const endpoint = await createEndpoint(server, who, `${receiver.url}?token=receiver-token-${who.workspaceId}`);

    const first = await createGeneration(server, who, 'first');
    const second = await createGeneration(server, who, 'second');
    for (const job of [first, second]) {
      await eventually(async () => ((await getGeneration(server, who, job.id)).status === 'succeeded' ? true : undefined), `job ${job.id} succeeds`);
    }
    await receiver.waitFor(2);
    t.equal((await server.fetch('/v1/test/fails', { headers: { 'user-agent': 'flow-test/1' } })).status, 500);

    const attemptOf = (id: string) => (all: ReadableSpan[]) =>
      all.find(
        (s) =>
          s.name === 'webhook attempt' &&
          String(s.attributes['url.full']).length > 0 &&
          all.some((p) => p.attributes['generation.id'] === id && traceOf(p) === traceOf(s)),
      );
    const spans = await eventually(async () => {
      const all = exporter.getFinishedSpans();
      return attemptOf(first.id)(all) && attemptOf(second.id)(all) && byName(all, 'GET /v1/test/fails').length === 1 ? all : undefined;
    }, 'the spans of both jobs, their webhook attempts included, are exported');

    const creates = byName(spans, 'POST /v1/generations');
    t.equal(creates.length, 2, 'one server span per create');
    const createOf = new Map<string, ReadableSpan>();
    for (const job of [first, second]) {
      const provider = spans.find((s) => s.attributes['generation.id'] === job.id && s.name === 'provider local');
      t.ok(provider, `a provider span for job ${job.id}`);
      const create = creates.find((s) => traceOf(s) === traceOf(provider));
      t.ok(create, `job ${job.id}: its provider call is in the trace of the request that created it`);
      if (create) createOf.set(job.id, create);
    }
    t.not(traceOf(createOf.get(first.id)), traceOf(createOf.get(second.id)), 'two creates, two traces');

    t.test('the tree of one create request', async (t) => {
      const create = createOf.get(first.id)!;
      const traceId = traceOf(create)!;
      const inTrace = spans.filter((s) => traceOf(s) === traceId);
      t.comment(`trace of POST /v1/generations (job ${first.id}):\n${tree(spans, traceId)}`);
      t.equal(create.kind, SpanKind.SERVER);
      t.equal(parentOf(create), undefined, 'the server span is the root');
      const wsCreate = inTrace.find((s) => s.name === 'actor ws create');
      t.equal(parentOf(wsCreate), create.spanContext().spanId, "the workspace actor's create is a child of the request");
      const wait = inTrace.find((s) => s.name === 'db.commit.wait' && parentOf(s) === wsCreate?.spanContext().spanId);
      t.ok(wait, 'the create waits for its commit in its own trace');
      const batch = spans.find(
        (s) => s.name === 'db.batch' && (parentOf(s) === wait?.spanContext().spanId || wait?.links.some((l) => l.context.spanId === s.spanContext().spanId)),
      );
      t.ok(batch, "and the batch that committed it is the wait's child, or linked from it");
      t.ok(
        batch && (traceOf(batch) === traceId || batch.links.some((l) => l.context.spanId === wait?.spanContext().spanId)),
        'the batch links back to the wait when it is in another trace',
      );
      const statements = spans.filter((s) => parentOf(s) === batch?.spanContext().spanId && s.kind === SpanKind.CLIENT);
      t.ok(statements.length > 0, "the batch's statements are its children");
      // Its workspace had a free slot: the job was reserved in its create's transaction and started by `start`.
      for (const name of ['actor gen start', 'provider local', 'webhook attempt'])
        t.ok(
          inTrace.some((s) => s.name === name),
          `${name} is in the create's trace`,
        );
      t.ok(
        inTrace.some((s) => s.name.startsWith('actor whk')),
        'so is the webhook actor',
      );
    });

    t.test('a queued job starts in its own trace, not in that of the job that freed its slot', async (t) => {
      const own = traceOf(createOf.get(second.id));
      const reserve = spans.find((s) => s.name === 'actor gen reserve' && s.attributes['actor.id'] === second.id);
      t.equal(traceOf(reserve), own, "its reserve message is in its create's trace");
      const foreign = spans.filter(
        (s) => traceOf(s) === traceOf(createOf.get(first.id)) && (s.attributes['actor.id'] === second.id || s.attributes['generation.id'] === second.id),
      );
      t.same(
        foreign.map((s) => s.name),
        [],
        "no span of the second job is in the first job's trace",
      );
      const [row] = await server.services.db.em().execute<Array<{ trace_context: unknown }>>('select trace_context from generations where id = ?', [second.id]);
      const stored = typeof row?.trace_context === 'string' ? JSON.parse(row.trace_context) : row?.trace_context;
      t.match(stored, { traceparent: new RegExp(`^00-${own}-[0-9a-f]{16}-01$`), requestId: /^req_/ }, 'its trace context and request id are stored with it');
    });

    t.test('semantic conventions', async (t) => {
      const create = createOf.get(first.id)!;
      t.match(
        create.attributes,
        {
          'http.request.method': 'POST',
          'http.route': '/v1/generations',
          'http.response.status_code': 201,
          'url.scheme': 'http',
          'url.path': '/v1/generations',
          'server.address': '127.0.0.1',
          'server.port': Number(new URL(server.url).port),
          'client.address': /\d/,
          'user_agent.original': /./,
          'network.protocol.version': '1.1',
        },
        'a server span carries the request attributes',
      );
      t.equal(create.attributes['error.type'], undefined, 'no error.type on a 201');
      const read = spans.find((s) => s.name === 'GET /v1/generations/:id');
      t.equal(read?.attributes['url.query'], `workspaceId=${who.workspaceId}`, 'url.query on a request with a query');
      const failed = byName(spans, 'GET /v1/test/fails')[0];
      t.match(
        failed?.attributes,
        { 'http.response.status_code': 500, 'error.type': 'TypeError', 'user_agent.original': 'flow-test/1' },
        'a 500 names its error.type',
      );

      // PostgreSQL's (and PGlite's) spans; Redis's, when REDIS_URL is set, come from its instrumentation as they are.
      const dbSpans = spans.filter((s) => s.attributes['db.system.name'] !== undefined && s.attributes['db.system.name'] !== 'redis');
      if (server.config.redisUrl)
        t.ok(
          spans.some((s) => s.attributes['db.system.name'] === 'redis' && s.attributes['db.operation.name'] !== undefined),
          'Redis commands have spans',
        );
      t.ok(dbSpans.length > 0, 'database spans');
      t.same(
        spans.filter((s) => s.attributes['db.system'] !== undefined).map((s) => s.name),
        [],
        'no span uses the old db.system',
      );
      for (const span of dbSpans) {
        if (
          span.attributes['db.system.name'] !== 'postgresql' ||
          typeof span.attributes['db.namespace'] !== 'string' ||
          typeof span.attributes['db.operation.name'] !== 'string'
        ) {
          t.fail(`database span ${span.name} lacks db.system.name=postgresql, db.namespace or db.operation.name: ${JSON.stringify(span.attributes)}`);
          return;
        }
      }
      t.pass('every database span has db.system.name=postgresql, db.namespace and db.operation.name');
      t.ok(
        dbSpans.some(
          (s) => s.name !== 'db.batch' && s.kind === SpanKind.CLIENT && !spans.some((b) => b.name === 'db.batch' && b.spanContext().spanId === parentOf(s)),
        ),
        'reads outside the group commit have spans too',
      );

      const attempt = attemptOf(first.id)(spans)!;
      t.equal(attempt.kind, SpanKind.CLIENT);
      t.match(attempt.attributes, {
        'http.request.method': 'POST',
        'url.full': receiver.url,
        'server.address': '127.0.0.1',
        'server.port': receiver.port,
        'http.response.status_code': 200,
      });
      t.notMatch(String(attempt.attributes['url.full']), /token/, 'url.full carries no query token');

      const resource = create.resource.attributes;
      t.match(
        resource,
        { 'service.name': 'generation-service', 'service.version': /^\d+\.\d+\.\d+/, 'service.instance.id': /^[0-9a-f-]{36}$/ },
        'the resource names the service, its version and its instance',
      );
    });

    t.test('logs at debug: JSON lines, an access line per request, no secret', async (t) => {
      await server.stop();
      const text = lines.join('\n');
      t.ok(lines.length > 10, 'lines were written');
      t.same(
        lines.filter((l) => {
          try {
            JSON.parse(l);
            return false;
          } catch {
            return true;
          }
        }),
        [],
        'every line is JSON',
      );
      const secrets = { key: who.key, 'webhook secret': endpoint.secret, password: who.password, cookie: who.cookie.replace(/^[^=]+=/, '').split(';')[0]! };
      for (const [what, value] of Object.entries(secrets)) {
        t.ok(value.length >= 8, `the ${what} is known to the test`);
        t.notOk(text.includes(value), `the ${what} appears in no log line`);
      }
      t.notOk(text.includes('receiver-token-'), 'nor the query token of the webhook URL');
      const access = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
      const create = access.find((l) => l.route === '/v1/generations' && l.method === 'POST');
      t.match(
        create,
        {
          level: 30,
          method: 'POST',
          route: '/v1/generations',
          status: 201,
          durationMs: Number,
          requestId: /^req_/,
          traceId: traceOf(createOf.get(first.id)) ?? traceOf(createOf.get(second.id)),
          keyId: /^key_/,
          workspaceId: who.workspaceId,
        },
        'the access line of a create: method, route template, status, duration, ids',
      );
      t.notOk('body' in (create ?? {}) || 'headers' in (create ?? {}), 'no body, no headers');
      t.ok(
        access.some((l) => l.route === '/v1/auth/signup' && l.status === 201),
        'the sign-up has its line too',
      );
    });
  },
);

t.test('a job queued before a restart starts, after it, in the trace of the request that created it', async (t) => {
  const { dataDir, postgres } = await durableStorage(t, 'gs-trace-restart-');
  const storage = { databaseUrl: postgres?.url ?? '', env: { DATA_DIR: dataDir, ALLOW_PRIVATE_EGRESS: 'true', ...(postgres ? {} : { DATABASE_URL: '' }) } };
  const before = new InMemorySpanExporter();
  // One provider slot, held by a first job for ten minutes: the second waits in the queue, and the service stops with it there.
  const first = await startTestServer(t, {
    ...storage,
    spanExporter: before,
    env: { ...storage.env, LOCAL_PROVIDER_LATENCY_MS: '600000', LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '1', SHUTDOWN_TIMEOUT_MS: '2000' },
  });
  const who = await tenant(first);
  const running = await createGeneration(first, who, 'holds the slot');
  await eventually(async () => ((await getGeneration(first, who, running.id)).status === 'submitted' ? true : undefined), 'the first job is with the provider');
  const job = await createGeneration(first, who, 'after the restart');
  await first.services.actors.drain();
  t.equal((await getGeneration(first, who, job.id)).status, 'queued');
  // The second of the two creates (the first one's trace holds its job's spans, started before).
  const create = await eventually(async () => {
    const creates = before.getFinishedSpans().filter((s) => s.name === 'POST /v1/generations');
    return creates.length === 2 ? creates.sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1])[1] : undefined;
  }, "the second create's span");
  await first.stop();

  const after = new InMemorySpanExporter();
  const second = await startTestServer(t, { ...storage, spanExporter: after, env: { ...storage.env, LOCAL_PROVIDER_LATENCY_MS: '0' } });
  await eventually(async () => ((await getGeneration(second, who, job.id)).status === 'succeeded' ? true : undefined), 'the job runs after the restart');
  const reserve = await eventually(
    async () => after.getFinishedSpans().find((s) => s.name === 'actor gen reserve' && s.attributes['actor.id'] === job.id),
    'its reserve span',
  );
  t.equal(traceOf(reserve), traceOf(create), "its work after the restart is in its create's trace");
  t.equal(parentOf(reserve) !== undefined, true, 'under a span of that request');
  const provider = await eventually(
    async () => after.getFinishedSpans().find((s) => s.name === 'provider local' && s.attributes['generation.id'] === job.id),
    'its provider span',
  );
  t.equal(traceOf(provider), traceOf(create), 'so is its provider call');
});
