/**
 * Recover throughput: an endpoint with RECOVER_DELIVERIES failed deliveries (default 10,000, as after a
 * long outage), then one POST /v1/webhooks/:id/recover over their range, timed until a loopback receiver
 * has every one of them and the history shows them delivered.
 *
 *   node --import tsx bench/recover.ts                       # PGlite in memory
 *   BENCH_DATABASE_URL=postgres://… node --import tsx bench/recover.ts
 *
 * Reports the recover request's time (queueing them all in one transaction) and deliveries per second
 * from the request to the last one delivered.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../runtime/config.ts';
import { startService } from '../app/service.ts';
import { newId } from '../persistence/ids.ts';
import { createKey, signUp } from '../test/helpers/identity.ts';
import type { TestServer } from '../test/helpers/server.ts';
import { freshDatabaseUrl } from '../test/helpers/database.ts';

const COUNT = Number(process.env.RECOVER_DELIVERIES ?? 10_000);

async function main(): Promise<void> {
  let received = 0;
  let lastBodyId = '';
  let inOrder = true;
  let done: () => void = () => {};
  const all = new Promise<void>((resolve) => {
    done = resolve;
  });
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = JSON.parse(Buffer.concat(chunks).toString('utf8')).id as string;
      if (id <= lastBodyId) inOrder = false;
      lastBodyId = id;
      res.writeHead(200).end('ok');
      if (++received === COUNT) done();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const base = process.env.BENCH_DATABASE_URL;
  const database = base
    ? await (async () => {
        process.env.TEST_DATABASE_URL = base;
        return freshDatabaseUrl();
      })()
    : { url: 'memory://', drop: async () => {} };
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATABASE_URL: database.url,
    DATA_DIR: '.data/bench-recover',
    ALLOW_PRIVATE_EGRESS: 'true',
    LOCAL_PROVIDER_LATENCY_MS: '1',
  });
  const service = await startService({ config });
  const server = {
    ...service,
    config,
    fetch: (path: string, init?: RequestInit) => fetch(`${service.url}${path}`, init),
    async json(path: string, init?: RequestInit) {
      const response = await fetch(`${service.url}${path}`, init);
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    },
  } as unknown as TestServer;
  try {
    const user = await signUp(server);
    const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
    const created = await server.json('/v1/webhooks', {
      method: 'POST',
      headers,
      body: JSON.stringify({ workspaceId: user.workspaceId, url, eventTypes: ['generation.completed'] }),
    });
    const endpointId = created.body.id as string;

    // The outage: COUNT deliveries that expired, one a second over the last hours, as the service would have kept them.
    const now = Date.now();
    const start = now - COUNT * 1000 - 60_000;
    const rows = Array.from({ length: COUNT }, (_, i) => {
      const at = start + i * 1000;
      const id = newId('dlv', at);
      const createdAt = new Date(at).toISOString();
      const body = JSON.stringify({
        id,
        event: 'generation.completed',
        data: {
          generationId: `gen_bench${i}`,
          workspaceId: user.workspaceId,
          mode: 'text_to_text',
          modelId: 'local/text-mini',
          status: 'succeeded',
          outputAssetIds: [],
          credits: 1,
          startedAt: createdAt,
          completedAt: createdAt,
        },
        createdAt,
      });
      return { id, generation_id: `gen_bench${i}`, body, created_at: createdAt };
    });
    const em = service.services.db.em();
    for (let i = 0; i < rows.length; i += 2000) {
      await em.execute(
        `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, body, status, attempts, attempt_count, created_at, updated_at)
         select v.id, ?, ?, v.generation_id, 'generation.completed', v.body, 'expired', '[]'::jsonb, 5, v.created_at, v.created_at
         from jsonb_to_recordset(?::jsonb) as v(id text, generation_id text, body text, created_at timestamptz)`,
        [endpointId, user.workspaceId, JSON.stringify(rows.slice(i, i + 2000))],
      );
    }

    const t0 = performance.now();
    const answer = await server.json(`/v1/webhooks/${endpointId}/recover`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ workspaceId: user.workspaceId, since: new Date(start).toISOString() }),
    });
    const queuedMs = performance.now() - t0;
    if (answer.status !== 202 || answer.body.count !== COUNT) throw new Error(`recover: ${answer.status} ${JSON.stringify(answer.body)}`);
    await all;
    const receivedMs = performance.now() - t0;
    // Delivered in the history too (the outcomes are written in batches).
    for (;;) {
      const [row] = await em.execute<Array<{ n: number }>>(`select count(*)::int as n from webhook_deliveries where endpoint_id = ? and status = 'delivered'`, [
        endpointId,
      ]);
      if (row!.n === COUNT) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const recordedMs = performance.now() - t0;
    console.log(
      JSON.stringify({
        database: base ? 'postgres' : 'pglite',
        deliveries: COUNT,
        inOrder,
        recoverRequestMs: Math.round(queuedMs),
        allReceivedMs: Math.round(receivedMs),
        deliveriesPerSecond: Math.round(COUNT / (receivedMs / 1000)),
        allRecordedMs: Math.round(recordedMs),
      }),
    );
  } finally {
    await service.stop();
    await database.drop();
    receiver.close();
  }
}

await main();
