// The fal kind's settings, its deployment target, its queue addresses and its webhook signature, as pure functions.
import t from 'tap';
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { falDeploymentTarget } from '../../providers/fal/deployment.ts';
import { answeredUrl, parseEndpointId, parseProviderJobId, providerJobIdOf, queueUrls } from '../../providers/fal/queue-urls.ts';
import { parseFalSettings } from '../../providers/fal/settings.ts';
import { checkWebhookSignature } from '../../providers/fal/signature.ts';

const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const JWK = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'EdDSA' };
const JWKS = JSON.stringify({ keys: [JWK] });
const KEY = 'key-id:key-secret-0123456789';

t.test('settings', async (t) => {
  t.test('unset: the kind is not configured, and that is no problem', async (t) => {
    t.same(parseFalSettings({}), { settings: undefined, problems: [] });
  });

  t.test('FAL_KEY alone: the public queue, polling only, no limit', async (t) => {
    const { settings, problems } = parseFalSettings({ FAL_KEY: ` ${KEY} ` });
    t.same(problems, []);
    t.match(settings, { key: KEY, queueUrl: 'https://queue.fal.run', webhookKeys: [] });
    t.equal(settings!.maxConcurrentJobs, undefined);
  });

  t.test('every field read', async (t) => {
    const { settings, problems } = parseFalSettings({
      FAL_KEY: KEY,
      FAL_QUEUE_URL: 'http://127.0.0.1:9000/',
      FAL_WEBHOOK_JWKS: JWKS,
      FAL_MAX_CONCURRENT_JOBS: '4',
    });
    t.same(problems, []);
    t.equal(settings!.queueUrl, 'http://127.0.0.1:9000', 'without the trailing slash');
    t.equal(settings!.webhookKeys.length, 1);
    t.equal(settings!.webhookKeys[0]!.asymmetricKeyType, 'ed25519');
    t.equal(settings!.maxConcurrentJobs, 4);
  });

  t.test('FAL_WEBHOOK_JWKS may be a file path', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'fal-jwks-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'jwks.json');
    await writeFile(file, JSON.stringify({ keys: [{ kty: 'RSA', n: 'x', e: 'AQAB' }, JWK] }));
    const { settings, problems } = parseFalSettings({ FAL_KEY: KEY, FAL_WEBHOOK_JWKS: file });
    t.same(problems, []);
    t.equal(settings!.webhookKeys.length, 1, 'the Ed25519 key, the RSA one skipped');
  });

  t.test('each bad value is one problem naming its variable, and no problem holds the key', async (t) => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ FAL_QUEUE_URL: 'https://queue.fal.run' }, /^FAL_KEY: not set, while FAL_QUEUE_URL is/],
      [{ FAL_KEY: 'id:secret with-space-secretvalue' }, /^FAL_KEY: holds white space/],
      [{ FAL_KEY: KEY, FAL_QUEUE_URL: 'ftp://queue.fal.run' }, /^FAL_QUEUE_URL=.*http\(s\) URL/],
      [{ FAL_KEY: KEY, FAL_QUEUE_URL: 'https://queue.fal.run/?x=1' }, /^FAL_QUEUE_URL=/],
      [{ FAL_KEY: KEY, FAL_WEBHOOK_JWKS: '{"keys": [' }, /^FAL_WEBHOOK_JWKS: not valid JSON/],
      [{ FAL_KEY: KEY, FAL_WEBHOOK_JWKS: '{"kty": "OKP"}' }, /^FAL_WEBHOOK_JWKS: not a JWKS document/],
      [{ FAL_KEY: KEY, FAL_WEBHOOK_JWKS: '{"keys": [{"kty": "RSA", "n": "x", "e": "AQAB"}]}' }, /^FAL_WEBHOOK_JWKS: holds no Ed25519 key/],
      [
        { FAL_KEY: KEY, FAL_WEBHOOK_JWKS: '{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "c2hvcnQ"}]}' },
        /^FAL_WEBHOOK_JWKS: an Ed25519 key whose "x" is not 32 bytes/,
      ],
      [{ FAL_KEY: KEY, FAL_WEBHOOK_JWKS: '/nonexistent/fal/jwks.json' }, /^FAL_WEBHOOK_JWKS: neither a JWKS JSON value nor a readable file \(ENOENT\)/],
      [{ FAL_KEY: KEY, FAL_MAX_CONCURRENT_JOBS: '0' }, /^FAL_MAX_CONCURRENT_JOBS="0": expected a whole number/],
      [{ FAL_KEY: KEY, FAL_MAX_CONCURRENT_JOBS: 'many' }, /^FAL_MAX_CONCURRENT_JOBS=/],
    ];
    for (const [env, problem] of cases) {
      const { settings, problems } = parseFalSettings(env);
      t.equal(settings, undefined, `${JSON.stringify(env)}: not configured`);
      t.equal(problems.length, 1, `${JSON.stringify(env)}: one problem`);
      t.match(problems[0], problem);
      t.notMatch(problems.join(' '), /secretvalue|key-secret-0123456789/, 'no secret in the problem');
    }
    t.equal(parseFalSettings({ FAL_KEY: KEY, FAL_QUEUE_URL: 'nope', FAL_MAX_CONCURRENT_JOBS: '-1' }).problems.length, 2, 'every problem, not just the first');
  });
});

t.test('deployment target', async (t) => {
  const ok = [
    { endpoint: 'fal-ai/flux/dev' },
    { endpoint: 'fal-ai/flux-pro/v1.1-ultra' },
    { endpoint: 'workflows/me/my-flow' },
    { endpoint: 'fal-ai/kling-video/v2/master/image-to-video', files: { image: 'start_image_url' } },
    { endpoint: 'fal-ai/any-llm', textField: 'output' },
  ];
  const bad = [
    {},
    { endpoint: 'flux' },
    { endpoint: 'fal-ai/flux/' },
    { endpoint: 'fal-ai/../secrets' },
    { endpoint: 'https://queue.fal.run/fal-ai/flux' },
    { endpoint: 'fal-ai/flux', model: 'x' },
    { endpoint: 'fal-ai/flux', files: { image: 'image-url' } },
    { endpoint: 'fal-ai/flux', files: { audio: 'audio_url' } },
  ];
  for (const target of ok) t.ok(Value.Check(falDeploymentTarget, target), `${JSON.stringify(target)} is a target`);
  for (const target of bad) t.notOk(Value.Check(falDeploymentTarget, target), `${JSON.stringify(target)} is not`);
});

t.test('queue addresses and provider job ids', async (t) => {
  t.same(parseEndpointId('fal-ai/flux/dev'), { app: 'fal-ai/flux', subpath: 'dev' });
  t.same(parseEndpointId('fal-ai/kling-video/v2/master/text-to-video'), { app: 'fal-ai/kling-video', subpath: 'v2/master/text-to-video' });
  t.same(parseEndpointId('workflows/me/flow/run'), { app: 'workflows/me/flow', subpath: 'run' }, 'a namespace keeps one more segment');
  t.equal(parseEndpointId('fal-ai'), undefined);
  t.equal(parseEndpointId('fal-ai/..'), undefined);

  t.same(queueUrls('https://queue.fal.run', 'fal-ai/flux', 'abc-123'), {
    status: 'https://queue.fal.run/fal-ai/flux/requests/abc-123/status',
    response: 'https://queue.fal.run/fal-ai/flux/requests/abc-123',
    cancel: 'https://queue.fal.run/fal-ai/flux/requests/abc-123/cancel',
  });

  const id = providerJobIdOf('fal-ai/flux', '764cabcf-b745-4b3e-ae38-1200304cf45b');
  t.equal(id, 'fal-ai/flux:764cabcf-b745-4b3e-ae38-1200304cf45b');
  t.same(parseProviderJobId(id), { app: 'fal-ai/flux', requestId: '764cabcf-b745-4b3e-ae38-1200304cf45b' });
  for (const wrong of ['764cabcf', ':764cabcf', 'fal-ai/flux:', 'fal-ai/flux/dev:764cabcf', 'fal-ai/flux:../../x', 'fal-ai:764cabcf']) {
    t.equal(parseProviderJobId(wrong), undefined, `${wrong} is not a fal job id`);
  }

  const fallback = 'https://queue.fal.run/fal-ai/flux/requests/r/status';
  t.equal(
    answeredUrl('https://queue.fal.run/fal-ai/flux/requests/r/status?x=1', 'https://queue.fal.run', fallback),
    'https://queue.fal.run/fal-ai/flux/requests/r/status?x=1',
    'an answered URL on the queue is used',
  );
  t.equal(answeredUrl('https://evil.example/steal', 'https://queue.fal.run', fallback), fallback, 'one elsewhere never gets the key');
  t.equal(answeredUrl(42, 'https://queue.fal.run', fallback), fallback);
});

t.test('webhook signature', async (t) => {
  const keys = parseFalSettings({ FAL_KEY: KEY, FAL_WEBHOOK_JWKS: JWKS }).settings!.webhookKeys;
  const body = Buffer.from('{"request_id":"req-1","status":"OK","payload":{}}');
  const now = 1_750_000_000_000;
  const signed = (timestamp: number, content = body) => {
    const message = `req-1\nuser-1\n${timestamp}\n${createHash('sha256').update(content).digest('hex')}`;
    return {
      'x-fal-webhook-request-id': 'req-1',
      'x-fal-webhook-user-id': 'user-1',
      'x-fal-webhook-timestamp': String(timestamp),
      'x-fal-webhook-signature': sign(null, Buffer.from(message), privateKey).toString('hex'),
    };
  };
  t.same(checkWebhookSignature(signed(now / 1000), body, now, keys), { ok: true, requestId: 'req-1' });
  t.same(checkWebhookSignature(signed(now / 1000 - 300), body, now, keys), { ok: true, requestId: 'req-1' }, 'five minutes old passes');
  t.match(checkWebhookSignature(signed(now / 1000 - 301), body, now, keys), { ok: false, message: /300 s/ }, 'a second more does not');
  t.match(checkWebhookSignature(signed(now / 1000 + 301), body, now, keys), { ok: false });
  t.match(
    checkWebhookSignature(signed(now / 1000), Buffer.from(`${body} `), now, keys),
    { ok: false, message: /does not match/ },
    'the digest covers the raw bytes',
  );
  t.match(checkWebhookSignature({ ...signed(now / 1000), 'x-fal-webhook-user-id': 'user-2' }, body, now, keys), { ok: false }, 'the user id is signed');
  t.match(checkWebhookSignature(signed(now / 1000), body, now, []), { ok: false, message: /FAL_WEBHOOK_JWKS/ });
});
