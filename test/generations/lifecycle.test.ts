import t from 'tap';
import { sharedTestServer, startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { eventually } from '../helpers/eventually.ts';

interface Gen {
  id: string;
  status: string;
  credits: number;
  textOutput: string | null;
  outputAssetIds: string[];
  errorCode: string | null;
  timeline: Array<{ status: string }>;
}

async function create(server: TestServer, key: string, workspaceId: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return server.json<Gen & { error?: { code: string; message: string } }>('/v1/generations', {
    method: 'POST',
    headers: withKey(key, headers),
    body: JSON.stringify({ workspaceId, ...body }),
  });
}

function waitFor(server: TestServer, key: string, workspaceId: string, id: string, done: (g: Gen) => boolean): Promise<Gen> {
  return eventually(
    async () => {
      const { body } = await server.json<Gen>(`/v1/generations/${id}?workspaceId=${workspaceId}`, { headers: withKey(key) });
      return done(body) ? body : undefined;
    },
    { timeoutMs: 10_000, everyMs: 25, what: `generation ${id} reaching the expected state` },
  );
}

async function balances(server: TestServer, workspaceId: string) {
  const [account] = await server.services.db
    .em()
    .execute<Array<{ available_credits: number; reserved_credits: number }>>(
      'select available_credits, reserved_credits from workspace_accounts where workspace_id = ?',
      [workspaceId],
    );
  const [ledger] = await server.services.db
    .em()
    .execute<Array<{ credits: string; reserved: string }>>(
      'select coalesce(sum(credits), 0)::int8 as credits, coalesce(sum(reserved_credits), 0)::int8 as reserved from credit_ledger where workspace_id = ?',
      [workspaceId],
    );
  return {
    available: Number(account!.available_credits),
    reserved: Number(account!.reserved_credits),
    ledgerAvailable: Number(ledger!.credits),
    ledgerReserved: Number(ledger!.reserved),
  };
}

t.test('a text generation runs queued → reserved → submitted → running → succeeded and captures its credits', async (t) => {
  const server = await sharedTestServer({ LOCAL_PROVIDER_LATENCY_MS: '0' });
  const user = await signUp(server);
  const { key, id: keyId } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);

  const created = await create(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'Say hello', seed: 7 } });
  t.equal(created.status, 201, JSON.stringify(created.body));
  t.equal(created.body.status, 'queued');
  t.equal(created.body.credits, 1);
  t.match(created.body.id, /^gen_/);
  t.equal((created.body as unknown as { apiKeyId: string }).apiKeyId, keyId, 'the key is recorded');

  const done = await waitFor(server, key, user.workspaceId, created.body.id, (g) => g.status === 'succeeded' || g.status === 'failed');
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.type(done.textOutput, 'string');
  t.ok(done.textOutput!.length > 0);
  t.same(
    done.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted', 'running', 'succeeded'],
  );

  await server.services.writer.flush();
  const money = await balances(server, user.workspaceId);
  t.same(money, { available: 99, reserved: 0, ledgerAvailable: 99, ledgerReserved: 0 }, 'free plan 100 credits, 1 spent, ledger agrees');
});

t.test('an image generation stores its PNG outputs as assets of the workspace', async (t) => {
  const server = await sharedTestServer({ LOCAL_PROVIDER_LATENCY_MS: '0' });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const created = await create(server, key, user.workspaceId, {
    mode: 'text_to_image',
    model: 'local/image-fast',
    params: { prompt: 'a lighthouse', numImages: 2, aspectRatio: '16:9' },
  });
  t.equal(created.status, 201, JSON.stringify(created.body));
  t.equal(created.body.credits, 8);
  const done = await waitFor(server, key, user.workspaceId, created.body.id, (g) => g.status === 'succeeded' || g.status === 'failed');
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(done.outputAssetIds.length, 2);
  const rows = await server.services.db
    .em()
    .execute<Array<{ id: string; content_type: string; width: number; height: number; source_generation_id: string }>>(
      'select id, content_type, width, height, source_generation_id from assets where workspace_id = ? order by id',
      [user.workspaceId],
    );
  t.same(rows.map((r) => r.id).sort(), [...done.outputAssetIds].sort());
  for (const row of rows) {
    t.equal(row.content_type, 'image/png');
    t.equal(row.source_generation_id, done.id);
    t.ok(row.width > row.height, '16:9 is wider than tall');
  }
});

t.test('refusals: unknown model, mode mismatch, bad params, inputs by mode, credits and plan limits', async (t) => {
  const server = await sharedTestServer({ LOCAL_PROVIDER_LATENCY_MS: '0' });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const cases: Array<[Record<string, unknown>, number, string, RegExp]> = [
    [{ mode: 'text_to_text', model: 'nope/x', params: { prompt: 'x' } }, 400, 'validation_error', /model: unknown model/],
    [{ mode: 'text_to_image', model: 'local/text-mini', params: { prompt: 'x' } }, 400, 'validation_error', /makes text_to_text, not text_to_image/],
    [{ mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'x', temperature: 3 } }, 400, 'validation_error', /params\.temperature/],
    [
      { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'x' }, inputs: { imageUrls: ['https://example.com/a.png'] } },
      400,
      'validation_error',
      /takes no input/,
    ],
    [{ mode: 'image_to_image', model: 'local/image-edit', params: { prompt: 'x' } }, 400, 'validation_error', /needs an input image/],
    [
      { mode: 'image_to_image', model: 'local/image-edit', params: { prompt: 'x' }, inputs: { imageUrls: ['data:video/mp4;base64,AAAA'] } },
      400,
      'validation_error',
      /data:image/,
    ],
    [
      { mode: 'image_to_image', model: 'local/image-edit', params: { prompt: 'x' }, inputs: { imageUrls: ['ftp://example.com/a.png'] } },
      400,
      'validation_error',
      /http\(s\)/,
    ],
    [
      { mode: 'image_to_image', model: 'local/image-edit', params: { prompt: 'x' }, inputs: { imageAssetIds: ['ast_nope'] } },
      400,
      'validation_error',
      /no asset ast_nope/,
    ],
    [
      { mode: 'video_to_video', model: 'local/video-restyle', params: { prompt: 'x' }, inputs: { imageUrls: ['https://example.com/a.png'] } },
      400,
      'validation_error',
      /video inputs/,
    ],
    [{ mode: 'text_to_video', model: 'local/video-short', params: { prompt: 'x' } }, 422, 'plan_limit_reached', /not available on the Free plan/],
    [
      { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'x', numImages: 4 }, paymentMode: 'wallet' },
      422,
      'wallet_pending_minimum',
      /deposit/,
    ],
  ];
  for (const [body, status, code, message] of cases) {
    const response = await create(server, key, user.workspaceId, body);
    t.equal(response.status, status, `${JSON.stringify(body)}: ${JSON.stringify(response.body)}`);
    t.equal(response.body.error?.code, code);
    t.match(response.body.error?.message, message);
  }
  // 100 free credits: 6 jobs of 16 credits fit, the seventh does not.
  for (let i = 0; i < 6; i++) {
    const ok = await create(server, key, user.workspaceId, { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: `x${i}`, numImages: 4 } });
    t.equal(ok.status, 201);
  }
  const broke = await create(server, key, user.workspaceId, { mode: 'text_to_image', model: 'local/image-fast', params: { prompt: 'x', numImages: 4 } });
  t.equal(broke.status, 402);
  t.equal(broke.body.error?.code, 'insufficient_credits');
  const count = await server.services.db
    .em()
    .execute<Array<{ n: string }>>('select count(*)::int8 as n from generations where workspace_id = ?', [user.workspaceId]);
  t.equal(Number(count[0]!.n), 6, 'refused requests made no generation');
});

t.test('cancel in queued state releases credits; cancelling again is 409; another workspace gets 404', async (t) => {
  // A long latency keeps jobs in flight; concurrency 2 on the free plan keeps the third queued.
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '60000' } });
  const user = await signUp(server);
  const other = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const { key: otherKey } = await createKey(server, other.cookie, other.workspaceId, ['all']);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await create(server, key, user.workspaceId, { mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `p${i}` } });
    ids.push(created.body.id);
  }
  const started = await waitFor(server, key, user.workspaceId, ids[0]!, (g) => g.status !== 'queued');
  t.ok(['reserved', 'submitted', 'running'].includes(started.status), `the first job left the queue (${started.status})`);
  const third = await server.json<Gen>(`/v1/generations/${ids[2]}?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  t.equal(third.body.status, 'queued', 'the plan concurrency (2) holds the third job in the queue');

  const foreign = await server.json(`/v1/generations/${ids[2]}/cancel?workspaceId=${other.workspaceId}`, { method: 'POST', headers: withKey(otherKey) });
  t.equal(foreign.status, 404, 'another workspace cannot cancel it');

  for (const id of [ids[2]!, ids[0]!]) {
    const cancelled = await server.json<Gen>(`/v1/generations/${id}/cancel?workspaceId=${user.workspaceId}`, { method: 'POST', headers: withKey(key) });
    t.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    t.equal(cancelled.body.status, 'cancelled');
    const again = await server.json<{ error: { code: string } }>(`/v1/generations/${id}/cancel?workspaceId=${user.workspaceId}`, {
      method: 'POST',
      headers: withKey(key),
    });
    t.equal(again.status, 409);
    t.equal(again.body.error.code, 'conflict');
  }
  await server.services.writer.flush();
  const money = await balances(server, user.workspaceId);
  t.equal(money.available, 99, 'two cancelled jobs released their credits; one is still reserved');
  t.equal(money.reserved, 1);
  t.equal(money.ledgerAvailable, money.available);
  t.equal(money.ledgerReserved, money.reserved);
});
