import t from 'tap';
import { Writable } from 'node:stream';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { Type } from '@sinclair/typebox';
import { defineRoute, type RouteDef } from '../../http/route.ts';
import { createLogger } from '../../runtime/logger.ts';
import { startTestServer } from '../helpers/server.ts';
import { counterBehavior, withCounters } from '../fixtures/counter-actor.ts';

/** GET /v1/test/logs/:id asks a counter actor, which logs `counter incremented` with the value it answers. */
const probeRoute: RouteDef = defineRoute({
  method: 'GET',
  path: '/v1/test/logs/:id',
  operationId: 'testLogs',
  summary: 'asks a counter actor that logs',
  tags: ['test'],
  access: 'public',
  params: Type.Object({ id: Type.String() }),
  responses: { 200: Type.Object({ value: Type.Integer() }) },
  handler: async ({ params, services }) => ({ body: { value: await withCounters(services.actors).ask('counter', params.id, { type: 'inc' }) } }),
});

function capture(): { destination: Writable; lines: Array<Record<string, any>>; text: () => string } {
  const raw: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      raw.push(
        ...String(chunk)
          .split('\n')
          .filter((l) => l.trim() !== ''),
      );
      callback();
    },
  });
  return {
    destination,
    get lines() {
      return raw.map((l) => JSON.parse(l));
    },
    text: () => raw.join('\n'),
  };
}

for (const tracing of [false, true]) {
  t.test(`concurrent requests to one actor: each actor log line carries its own message's request id (tracing ${tracing ? 'on' : 'off'})`, async (t) => {
    const log = capture();
    const { behavior } = counterBehavior('counter');
    const server = await startTestServer(t, {
      behaviors: [behavior],
      routes: [probeRoute],
      logDestination: log.destination,
      env: { LOG_LEVEL: 'info' },
      ...(tracing ? { spanExporter: new InMemorySpanExporter() } : {}),
    });
    // Many messages in one mailbox at once: the actor handles the later ones in the loop the first one woke.
    const answers = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const response = await server.fetch('/v1/test/logs/shared');
        return { value: ((await response.json()) as { value: number }).value, requestId: response.headers.get('x-request-id') };
      }),
    );
    const byValue = new Map(answers.map((a) => [a.value, a.requestId]));
    t.equal(byValue.size, 12, 'twelve increments, twelve values');
    const actorLines = log.lines.filter((l) => l.msg === 'counter incremented' && l.actor === 'counter:shared');
    t.equal(actorLines.length, 12);
    t.same(
      actorLines.filter((l) => l.requestId !== byValue.get(l.value)).map((l) => ({ value: l.value, logged: l.requestId, sentBy: byValue.get(l.value) })),
      [],
      'every line names the request whose message it handled',
    );
    if (tracing) {
      const access = new Map(log.lines.filter((l) => l.msg === 'request').map((l) => [l.requestId, l.traceId]));
      t.same(
        actorLines.filter((l) => access.get(l.requestId) !== l.traceId).map((l) => l.value),
        [],
        "and its trace id is that request's",
      );
    }
  });
}

t.test('a message sent outside any request carries no request id, even when the actor was woken by one', async (t) => {
  const log = capture();
  const { behavior } = counterBehavior('counter');
  const server = await startTestServer(t, { behaviors: [behavior], routes: [probeRoute], logDestination: log.destination, env: { LOG_LEVEL: 'info' } });
  const asked = server.fetch('/v1/test/logs/solo');
  // Sent from no request at all (a timer, recovery…): queued behind the request's message.
  const value = await new Promise<number>((resolve, reject) =>
    setImmediate(() => withCounters(server.services.actors).ask('counter', 'solo', { type: 'inc' }).then(resolve, reject)),
  );
  await asked;
  const line = log.lines.find((l) => l.msg === 'counter incremented' && l.actor === 'counter:solo' && l.value === value);
  t.ok(line, 'the line of the message sent outside any request');
  t.equal(line?.requestId, undefined, 'it carries no request id');
});

t.test('redaction: credentials by name, the headers that carry them, and passwords inside URLs', async (t) => {
  const log = capture();
  const logger = createLogger('debug', log.destination);
  logger.info(
    {
      req: { headers: { authorization: 'Bearer sk_live_header', cookie: 'gs_session=cookie-value', 'x-api-key': 'sk_live_xkey' } },
      res: { headers: { 'set-cookie': 'gs_session=set-cookie-value' } },
      key: 'sk_live_key',
      apiKey: 'sk_live_apikey',
      secret: 'whsec_secret',
      password: 'hunter2-password',
      token: 'tok-token',
      endpoint: { signingSecret: 'whsec_nested', url: 'https://user:url-password@hooks.example.com/x' },
      deep: { down: { password: 'deep-password' } },
    },
    'connecting to postgres://svc:dsn-password@db:5432/app',
  );
  logger.error({ err: new Error('could not reach redis://:redis-password@cache:6379') }, 'failed');
  const text = log.text();
  for (const secret of [
    'sk_live_header',
    'cookie-value',
    'sk_live_xkey',
    'set-cookie-value',
    'sk_live_key',
    'sk_live_apikey',
    'whsec_secret',
    'hunter2-password',
    'tok-token',
    'whsec_nested',
    'url-password',
    'deep-password',
    'dsn-password',
    'redis-password',
  ]) {
    t.notOk(text.includes(secret), `${secret} is not written`);
  }
  const [first] = log.lines;
  t.equal(first?.req.headers.authorization, '[redacted]');
  t.equal(first?.res.headers['set-cookie'], '[redacted]');
  t.equal(first?.endpoint.url, 'https://user:[redacted]@hooks.example.com/x', 'the URL is kept, its password replaced');
  t.match(first?.msg, 'postgres://svc:[redacted]@db:5432/app');
});
