import net from 'node:net';
import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, withCookie, withKey } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { uploadAsset } from '../files/support.ts';
import { createEndpoint, eventually, startReceiver } from '../webhooks/support.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';

// Free text full of what would end or change a SQL statement if it were spliced into one: stored and returned
// exactly, through every layer, and a job whose failure message holds it still settles.
const TEXT = `a;b 'single' "double" back\\slash $1 $$ -- ?? \\? /* é 漢字 😀`;
const FILE_NAME = `a;b 'single' "double" $1 -- é.png`;
const IDEMPOTENCY_KEY = `a;b'"\\$1--??;drop`;

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function settled(server: TestServer, key: string, workspaceId: string, id: string): Promise<any> {
  return eventually(
    async () => {
      const { body } = await server.json(`/v1/generations/${id}?workspaceId=${workspaceId}`, { headers: withKey(key) });
      return ['succeeded', 'failed', 'cancelled', 'expired'].includes(body.status) ? body : undefined;
    },
    `generation ${id} settles`,
    20_000,
  );
}

async function credits(server: TestServer, key: string, workspaceId: string): Promise<{ available: number; reserved: number }> {
  const { body } = await server.json(`/v1/workspaces/${workspaceId}/credits`, { headers: withKey(key) });
  return { available: body.availableCredits, reserved: body.reservedCredits };
}

t.test('names, prompts, projects, file names, webhook URLs and idempotency keys are stored and returned as sent', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '0', RATE_LIMIT_FREE: '100000' } });
  const user = await signUp(server, { name: TEXT });
  const me = await server.json('/v1/me', { headers: withCookie(user.cookie) });
  t.equal(me.body.name, TEXT, 'sign-up name');
  t.equal(
    (await server.json('/v1/me', { method: 'PATCH', headers: withCookie(user.cookie), body: JSON.stringify({ name: `${TEXT}!` }) })).body.name,
    `${TEXT}!`,
    'account name',
  );

  const workspace = await server.json('/v1/workspaces', { method: 'POST', headers: withCookie(user.cookie), body: JSON.stringify({ name: TEXT }) });
  t.equal(workspace.status, 201);
  t.equal((await server.json(`/v1/workspaces/${workspace.body.id}`, { headers: withCookie(user.cookie) })).body.name, TEXT, 'workspace name');

  const { id: keyId, key } = await createKey(server, user.cookie, user.workspaceId, ['all'], { name: TEXT });
  const keys = await server.json(`/v1/api-keys?workspaceId=${user.workspaceId}`, { headers: withCookie(user.cookie) });
  t.equal(keys.body.data.find((k: any) => k.id === keyId)?.name, TEXT, 'key name');

  const asset = await uploadAsset(server, { authorization: `Bearer ${key}` }, user.workspaceId, makePng(4, 4), { filename: FILE_NAME });
  t.equal(asset.name, FILE_NAME, 'uploaded file name');
  t.equal((await server.json(`/v1/assets/${asset.id}?workspaceId=${user.workspaceId}`, { headers: withKey(key) })).body.name, FILE_NAME);

  const hookUrl = `http://127.0.0.1:1/hook;a?x='y'&z=$1--`;
  const hook = await server.json('/v1/webhooks', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({ workspaceId: user.workspaceId, url: hookUrl, eventTypes: ['generation.failed'] }),
  });
  t.equal(hook.status, 201, hook.status === 201 ? 'created' : JSON.stringify(hook.body));
  const hooks = await server.json(`/v1/webhooks?workspaceId=${user.workspaceId}`, { headers: withKey(key) });
  t.equal(hooks.body.data.find((h: any) => h.id === hook.body.id)?.url, hookUrl, 'webhook URL');
  t.equal((await server.json(`/v1/webhooks/${hook.body.id}?workspaceId=${user.workspaceId}`, { method: 'DELETE', headers: withKey(key) })).status, 200);

  // A generation whose prompt, system prompt and project hold the text, made with an Idempotency-Key holding `;`.
  const create = (project: string, idempotencyKey?: string) =>
    server.json('/v1/generations', {
      method: 'POST',
      headers: withKey(key, idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
      body: JSON.stringify({
        workspaceId: user.workspaceId,
        mode: 'text_to_text',
        model: 'local/text-mini',
        params: { prompt: TEXT, systemPrompt: TEXT },
        project,
      }),
    });
  const first = await create(TEXT, IDEMPOTENCY_KEY);
  t.equal(first.status, 201, first.status === 201 ? 'created' : JSON.stringify(first.body));
  const replay = await create(TEXT, IDEMPOTENCY_KEY);
  t.equal(replay.status, 201, 'the same key again is a replay, not an error');
  t.equal(replay.headers.get('idempotent-replayed'), 'true');
  t.equal(replay.body.id, first.body.id, 'the replay answers the first generation');
  const done = await settled(server, key, user.workspaceId, first.body.id);
  t.equal(done.status, 'succeeded');
  t.same([done.params.prompt, done.params.systemPrompt, done.project], [TEXT, TEXT, TEXT], 'prompt, system prompt and project');
  const other = await create('a;b');
  t.equal(other.status, 201);
  const plain = await create('plain');
  t.equal(plain.status, 201);

  const list = async (query: string) => {
    const res = await server.json(`/v1/generations?workspaceId=${user.workspaceId}&${query}`, { headers: withKey(key) });
    t.equal(res.status, 200, `?${query}: 200`);
    return (res.body.data ?? []).map((g: any) => g.id);
  };
  t.same(await list(`project=${encodeURIComponent(TEXT)}`), [first.body.id], 'filter by a project with ; and quotes');
  t.same(await list('project=a;b'), [other.body.id], 'a raw ; in the query string');
  t.same(await list(`project=${encodeURIComponent("x' or '1'='1")}`), [], 'a quote does not widen the filter');
  t.same(await list('model=a;b'), [], 'model=a;b');
  t.same(await list(`model=${encodeURIComponent("local/text-mini' --")}`), [], 'a model with a comment');
  t.same((await list('model=local/text-mini')).length, 3, 'the control: the three generations');
  const usage = await server.json(`/v1/usage?workspaceId=${user.workspaceId}&apiKeyId=a;b`, { headers: withCookie(user.cookie) });
  t.equal(usage.status, 200, 'usage?apiKeyId=a;b');
  t.match(usage.body, { apiKeyId: 'a;b', generations: { total: 0 } }, 'no generation of such a key');
  const byKey = await server.json(`/v1/usage?workspaceId=${user.workspaceId}&apiKeyId=${keyId}`, { headers: withCookie(user.cookie) });
  t.match(byKey.body, { apiKeyId: keyId, generations: { total: 3 } }, "the control: the key's own three generations");
});

t.test('an input URL with ; fails the job: credits released and generation.failed delivered', async (t) => {
  const server = await startTestServer(t, { env: { ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const receiver = await startReceiver(t);
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const endpoint = await createEndpoint(server, { ...user, key }, receiver.url, ['generation.failed']);
  const before = await credits(server, key, user.workspaceId);

  // Nothing listens on the port: the fetch fails and its message quotes the URL, `;` and quotes included.
  const url = `http://127.0.0.1:${await closedPort()}/a;b'c$1--.png`;
  const created = await server.json('/v1/generations', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({
      workspaceId: user.workspaceId,
      mode: 'image_to_image',
      model: 'local/image-edit',
      params: { prompt: TEXT },
      inputs: { imageUrls: [url] },
    }),
  });
  t.equal(created.status, 201, created.status === 201 ? 'created' : JSON.stringify(created.body));
  const failed = await settled(server, key, user.workspaceId, created.body.id);
  t.equal(failed.status, 'failed');
  t.match(failed.errorMessage, "a;b'c$1--.png", 'the failure message holds the URL as it was');
  t.same(await credits(server, key, user.workspaceId), before, 'the reservation is released');

  const [request] = await receiver.waitFor(1);
  const event = verifyWebhook(request!.rawBody, request!.headers['x-service-signature'], endpoint.secret);
  t.equal(event.event, 'generation.failed');
  t.equal(event.data.generationId, created.body.id);
  t.equal(event.data.errorMessage, failed.errorMessage, 'the webhook carries the same message');
});

t.test('an input URL with ; refused by the egress guard fails the job and releases its credits', async (t) => {
  const server = await startTestServer(t, { env: { LOCAL_PROVIDER_LATENCY_MS: '0' } });
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['all']);
  const before = await credits(server, key, user.workspaceId);
  const created = await server.json('/v1/generations', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({
      workspaceId: user.workspaceId,
      mode: 'image_to_image',
      model: 'local/image-edit',
      params: { prompt: 'x' },
      inputs: { imageUrls: ['http://10.0.0.1/a;b.png'] },
    }),
  });
  t.equal(created.status, 201, created.status === 201 ? 'created' : JSON.stringify(created.body));
  const failed = await settled(server, key, user.workspaceId, created.body.id);
  t.equal(failed.status, 'failed');
  t.match(failed.errorMessage, 'http://10.0.0.1/a;b.png');
  t.same(await credits(server, key, user.workspaceId), before, 'the reservation is released');
});
