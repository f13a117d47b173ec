import t from 'tap';
import { Value } from '@sinclair/typebox/value';
import { cogDeploymentTarget } from '../../providers/cog/deployment.ts';
import { collectOutputs, decodeDataUrl } from '../../providers/cog/outputs.ts';
import { cogErrorText, readPrediction } from '../../providers/cog/prediction.ts';
import { COG_WEBHOOK_RETRY_GAP_MS, COG_WEBHOOK_RETRY_WINDOW_MS, parseCogSettings } from '../../providers/cog/settings.ts';
import { COG_WEBHOOK_MAX_RETRIES, cogWebhookBackoffMs } from '../fakes/cog.ts';
import { jobToken, verifyCogEvent, webhookUrl } from '../../providers/cog/webhook.ts';

const SECRET = 'cog-webhook-secret-of-the-tests-0123456789';

t.test('settings: unset means not configured; each bad value is one problem naming its variable, never a secret', async (t) => {
  t.same(parseCogSettings({}), { settings: undefined, problems: [] });
  t.same(parseCogSettings({ COG_BASE_URL: 'http://cog:5000/', COG_WEBHOOK_SECRET: SECRET }).settings, {
    baseUrl: 'http://cog:5000',
    webhookSecret: SECRET,
    maxConcurrentJobs: 1,
    busyRetryMs: 1_000,
    webhookRetryWindowMs: 420_000,
    webhookRetryGapMs: 135_000,
  });
  t.match(
    parseCogSettings({
      COG_BASE_URL: 'http://cog:5000',
      COG_WEBHOOK_SECRET: SECRET,
      COG_WEBHOOK_AUTH_TOKEN: 'tok',
      COG_MAX_CONCURRENT_JOBS: '4',
      COG_BUSY_RETRY_MS: '250',
      COG_WEBHOOK_RETRY_WINDOW_MS: '22000',
      COG_WEBHOOK_RETRY_GAP_MS: '7000',
    }).settings,
    { webhookAuthToken: 'tok', maxConcurrentJobs: 4, busyRetryMs: 250, webhookRetryWindowMs: 22_000, webhookRetryGapMs: 7_000 },
  );
  // The defaults are Cog's own schedule (crates/coglet/src/webhook.rs), as the fake reproduces it.
  const waits = Array.from({ length: COG_WEBHOOK_MAX_RETRIES }, (_, i) => cogWebhookBackoffMs(i + 1));
  t.equal(
    waits.reduce((a, b) => a + b, 0),
    409_400,
    '12 retries, 0.2 s doubling to 102.4 s: 409.4 s of waits',
  );
  t.ok(COG_WEBHOOK_RETRY_WINDOW_MS >= 409_400, 'the window covers them');
  t.ok(COG_WEBHOOK_RETRY_GAP_MS >= Math.max(...waits), 'the gap covers the longest wait');
  const short = 'short-secret-value';
  const bad = parseCogSettings({ COG_BASE_URL: 'ftp://user:pw@cog', COG_WEBHOOK_SECRET: short, COG_MAX_CONCURRENT_JOBS: '0', COG_BUSY_RETRY_MS: 'soon' });
  t.equal(bad.settings, undefined);
  t.equal(bad.problems.length, 4);
  t.match(bad.problems, [/^COG_BASE_URL/, /^COG_WEBHOOK_SECRET .*32/, /^COG_MAX_CONCURRENT_JOBS/, /^COG_BUSY_RETRY_MS/]);
  t.notOk(
    bad.problems.some((problem) => problem.includes(short)),
    'the secret is not repeated',
  );
  t.match(parseCogSettings({ COG_BASE_URL: 'http://cog:5000' }).problems, [/COG_WEBHOOK_SECRET is required/]);
});

t.test('deployment target: the schema takes the input names and an optional container URL, nothing else', async (t) => {
  t.ok(Value.Check(cogDeploymentTarget, {}));
  t.ok(
    Value.Check(cogDeploymentTarget, {
      baseUrl: 'http://cog-sdxl:5000',
      imageInput: 'init_image',
      imageInputIsList: false,
      videoInput: 'clip',
      maskInput: 'mask',
    }),
  );
  t.notOk(Value.Check(cogDeploymentTarget, { model: 'owner/name' }), 'no model to choose: a container serves one');
  t.notOk(Value.Check(cogDeploymentTarget, { baseUrl: 'file:///etc/passwd' }));
});

t.test('webhook token: HMAC-SHA256 of the generation id in the URL; checked in constant time; a stable event id', async (t) => {
  const url = new URL(webhookUrl('https://api.example.com/v1/providers/cog-sdxl/events', SECRET, 'gen_1'));
  t.equal(url.searchParams.get('job'), 'gen_1');
  t.equal(url.searchParams.get('token'), jobToken(SECRET, 'gen_1'));
  t.match(jobToken(SECRET, 'gen_1'), /^[0-9a-f]{64}$/);
  t.not(jobToken(SECRET, 'gen_1'), jobToken(SECRET, 'gen_2'));

  const body = Buffer.from('{"id":"gen_1","status":"succeeded","output":"x","logs":"","metrics":{}}');
  const query = { job: 'gen_1', token: jobToken(SECRET, 'gen_1') };
  const first = verifyCogEvent({ headers: {}, body, query, now: 0 }, SECRET);
  const again = verifyCogEvent({ headers: {}, body, query, now: 1 }, SECRET);
  t.match(first, { ok: true, providerJobId: 'gen_1', payload: { status: 'succeeded' } });
  t.equal(first.ok && again.ok && first.eventId === again.eventId, true, 'an exact repeat has the same event id');
  const other = verifyCogEvent({ headers: {}, body: Buffer.from('{"id":"gen_1","status":"processing","logs":"","metrics":{}}'), query, now: 0 }, SECRET);
  t.ok(first.ok && other.ok && first.eventId !== other.eventId, 'another state, another event id');

  t.match(verifyCogEvent({ headers: {}, body, query: { job: 'gen_1', token: query.token.slice(0, 63) }, now: 0 }, SECRET), { ok: false });
  t.match(verifyCogEvent({ headers: {}, body, query: { job: 'gen_1', token: query.token.toUpperCase() }, now: 0 }, SECRET), { ok: false });
  t.match(verifyCogEvent({ headers: {}, body: Buffer.from('not json'), query, now: 0 }, SECRET), { ok: false, message: /not JSON/ });
  t.match(verifyCogEvent({ headers: {}, body: Buffer.from('{"id":"gen_1"}'), query, now: 0 }, SECRET), { ok: false, message: /not a prediction/ });
  t.match(verifyCogEvent({ headers: {}, body, query, now: 0 }, SECRET, 'auth'), { ok: false, message: /Authorization/ });
  t.match(verifyCogEvent({ headers: { authorization: 'Bearer auth' }, body, query, now: 0 }, SECRET, 'auth'), { ok: true });
});

t.test('predictions and error bodies as both Cog servers write them', async (t) => {
  t.same(readPrediction({ id: 'a', status: 'starting' }), { id: 'a', status: 'starting' });
  t.same(readPrediction({ id: 'a', status: 'failed', error: 'boom', logs: 'l', output: null }), { id: 'a', status: 'failed', error: 'boom', logs: 'l' });
  t.equal(readPrediction({ status: 'queued' }), undefined);
  t.equal(readPrediction([]), undefined);
  t.equal(cogErrorText({ error: 'At capacity - all prediction slots busy', status: 'failed' }, ''), 'At capacity - all prediction slots busy');
  t.equal(cogErrorText({ detail: 'Already running a prediction' }, ''), 'Already running a prediction');
  t.equal(
    cogErrorText({ detail: [{ loc: ['body', 'input', 'prompt'], msg: 'Field required', type: 'value_error.missing' }] }, ''),
    'body.input.prompt: Field required',
  );
  t.equal(cogErrorText(undefined, 'plain text'), 'plain text');
});

t.test('data URLs: refused before decoding when too large, or when not base64', async (t) => {
  t.same(decodeDataUrl('data:text/plain;base64,aGk=', 10), Buffer.from('hi'));
  t.throws(() => decodeDataUrl(`data:image/png;base64,${'A'.repeat(400)}`, 100), { code: 'provider_bad_response', message: /larger than 100/ });
  t.throws(() => decodeDataUrl('data:image/png,rawbytes', 100), { code: 'provider_bad_response' });
  t.throws(() => decodeDataUrl('data:image/png;base64,**', 100), { code: 'provider_bad_response' });
  const limits = { maxOutputBytes: 100, fetchOutput: async () => Buffer.alloc(0) };
  await t.rejects(collectOutputs(42, 'text_to_text', limits), { code: 'provider_bad_response' });
  await t.rejects(collectOutputs(undefined, 'text_to_video', limits), { code: 'provider_bad_response', message: /no video file/ });
});
