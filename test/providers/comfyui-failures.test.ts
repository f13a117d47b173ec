import t from 'tap';
import type { Test } from 'tap';
import { createComfyuiAdapter } from '../../providers/comfyui/adapter.ts';
import { WORKFLOWS, comfyContext, comfyJob, startFakeComfyui, updateLog } from '../fakes/comfyui.ts';
import { eventually } from '../helpers/eventually.ts';

const KEY = 'cfy-proxy-key-5f1e9a7c3b';
const fake = await startFakeComfyui({ apiKey: KEY });
t.teardown(() => fake.close());
const settings = { baseUrl: fake.url, apiKey: KEY };
const deployment = { id: 'sd15', target: { workflow: WORKFLOWS.textToImage, defaults: { steps: 20 } } };

function adapterFor(t: Test, context = comfyContext({ requestTimeoutMs: 500 }), withSettings: { baseUrl: string; apiKey?: string } = settings) {
  const adapter = createComfyuiAdapter(withSettings, deployment, context);
  t.teardown(() => adapter.close());
  return adapter;
}

t.test('a workflow ComfyUI refuses (400 with error and node_errors) is input rejected, with its message', async (t) => {
  const adapter = adapterFor(t);
  const job = comfyJob({ input: { width: 8, height: 48 } });
  await t.rejects(adapter.submit(job, updateLog().report), {
    code: 'provider_input_rejected',
    message: /Prompt outputs failed validation.*Value 8 smaller than min of 16.*node 5 \(EmptyLatentImage\)/,
  });
});

t.test('the workflow failing at the server ends the job with provider_error and its exception', async (t) => {
  const adapter = adapterFor(t);
  fake.failNext({ exception_type: 'torch.OutOfMemoryError', exception_message: 'Allocation on device' });
  const log = updateLog();
  await adapter.submit(comfyJob(), log.report);
  t.match(await log.end, {
    type: 'failed',
    errorCode: 'provider_error',
    errorMessage: /node 3 \(KSampler\) with torch\.OutOfMemoryError: Allocation on device/,
  });
});

t.test('429 with Retry-After on /prompt: the job waits, then is queued once', async (t) => {
  const adapter = adapterFor(t);
  fake.misbehave('POST /prompt', { status: 429, headers: { 'retry-after': '0.05' } });
  const log = updateLog();
  const before = fake.submissions.length;
  await adapter.submit(comfyJob(), log.report);
  t.ok(
    log.updates.some((u) => u.type === 'progress' && /rate limiting/.test(u.detail)),
    'the wait is on the timeline',
  );
  t.match(await log.end, { type: 'succeeded' });
  t.equal(fake.submissions.length - before, 1);
});

t.test('429 whose Retry-After passes the deadline fails with provider_rate_limited', async (t) => {
  const adapter = adapterFor(t);
  fake.misbehave('POST /prompt', { status: 429, headers: { 'retry-after': '120' } });
  await t.rejects(adapter.submit(comfyJob({ deadline: Date.now() + 5_000 }), updateLog().report), { code: 'provider_rate_limited' });
});

t.test('429 on the history while following: the job stays running, waits, then succeeds', async (t) => {
  const adapter = adapterFor(t);
  fake.silentSockets = true;
  t.teardown(() => {
    fake.silentSockets = false;
  });
  fake.misbehave('GET /history', { status: 429, headers: { 'retry-after': '0.1' }, times: 2 });
  const log = updateLog();
  await adapter.submit(comfyJob(), log.report);
  t.match(await log.end, { type: 'succeeded' });
  t.ok(log.updates.some((u) => u.type === 'progress' && /rate limiting/.test(u.detail)));
});

t.test('5xx, a hang and malformed JSON on /prompt', async (t) => {
  const adapter = adapterFor(t);
  fake.misbehave('POST /prompt', { status: 503, body: 'upstream connect error' });
  await t.rejects(adapter.submit(comfyJob(), updateLog().report), { code: 'provider_unavailable', message: /503: upstream connect error/ });
  fake.misbehave('POST /prompt', { status: 500, body: '500 Internal Server Error' });
  await t.rejects(adapter.submit(comfyJob(), updateLog().report), { code: 'provider_error' });
  fake.misbehave('POST /prompt', { hang: true });
  await t.rejects(adapter.submit(comfyJob(), updateLog().report), { code: 'provider_timeout' });
  fake.misbehave('POST /prompt', { malformed: true });
  await t.rejects(adapter.submit(comfyJob(), updateLog().report), { code: 'provider_bad_response' });
});

t.test('while following, a 5xx is waited out; malformed history JSON fails with provider_bad_response', async (t) => {
  fake.silentSockets = true;
  t.teardown(() => {
    fake.silentSockets = false;
  });
  const adapter = adapterFor(t);
  fake.misbehave('GET /history', { status: 502, times: 2 });
  const log = updateLog();
  await adapter.submit(comfyJob(), log.report);
  t.match(await log.end, { type: 'succeeded' }, 'two 502s, then the history');

  fake.paused = true;
  const second = updateLog();
  await adapter.submit(comfyJob(), second.report);
  fake.misbehave('GET /history', { malformed: true });
  t.match(await second.end, { type: 'failed', errorCode: 'provider_bad_response' });
  fake.paused = false;
});

t.test('a server down until the deadline: provider_unavailable; a prompt never done by it: provider_timeout', async (t) => {
  fake.silentSockets = true;
  t.teardown(() => {
    fake.silentSockets = false;
    fake.paused = false;
  });
  const adapter = adapterFor(t);
  fake.paused = true;
  const log = updateLog();
  await adapter.submit(comfyJob({ deadline: Date.now() + 300 }), log.report);
  const end = await log.end;
  t.match(end, { type: 'failed', errorCode: 'provider_timeout' });
  t.notOk(fake.queued().pending.includes(fake.submissions.at(-1)!.promptId), 'the prompt was taken off the queue');

  const down = updateLog();
  await adapter.submit(comfyJob({ deadline: Date.now() + 300 }), down.report);
  fake.misbehave('GET /history', { status: 503, times: 1000 });
  t.match(await down.end, { type: 'failed', errorCode: 'provider_unavailable' });
  fake.behave();
});

t.test('an output larger than maxOutputBytes, and an expired output (404 from /view)', async (t) => {
  const small = adapterFor(t, comfyContext({ maxOutputBytes: 4_000 }));
  fake.outputPadding = 5_000;
  const log = updateLog();
  await small.submit(comfyJob(), log.report);
  t.match(await log.end, { type: 'failed', errorCode: 'provider_output_fetch_failed', errorMessage: /larger than 4000 bytes/ });
  fake.outputPadding = 0;

  const adapter = adapterFor(t);
  fake.misbehave('GET /view', { status: 404, body: '404: Not Found' });
  const expired = updateLog();
  await adapter.submit(comfyJob(), expired.report);
  t.match(await expired.end, { type: 'failed', errorCode: 'provider_output_fetch_failed', errorMessage: /404 \(ComfyUI no longer has it\)/ });
});

t.test('the key goes as a Bearer token; a wrong one is provider_auth_failed; the key never shows in a message', async (t) => {
  const wrong = adapterFor(t, comfyContext(), { baseUrl: fake.url, apiKey: 'cfy-wrong-key-0123456789' });
  await t.rejects(wrong.submit(comfyJob(), updateLog().report), { code: 'provider_auth_failed', message: /401/ }, 'the proxy refuses a wrong key');
  const none = adapterFor(t, comfyContext(), { baseUrl: fake.url });
  await t.rejects(none.submit(comfyJob(), updateLog().report), { code: 'provider_auth_failed' }, 'and no key');

  const adapter = adapterFor(t);
  fake.misbehave('POST /prompt', { status: 403, body: `token ${KEY} lacks the scope (sent as Bearer ${KEY})` });
  const error = await adapter.submit(comfyJob(), updateLog().report).catch((e: Error & { code: string }) => e);
  t.match(error, { code: 'provider_auth_failed', message: /lacks the scope/ });
  t.notMatch((error as Error).message, KEY, 'the key is redacted');

  fake.paused = true;
  t.teardown(() => {
    fake.paused = false;
  });
  const log = updateLog();
  await adapter.submit(comfyJob(), log.report);
  fake.misbehave('GET /history', { status: 401, body: `expired: ${KEY}` });
  const end = await log.end;
  t.match(end, { type: 'failed', errorCode: 'provider_auth_failed' }, 'while following too');
  t.notMatch(JSON.stringify(log.updates), KEY, 'no update carries the key');
});

t.test('the poll backstop carries a job whose socket says nothing, and a dropped socket is reopened', async (t) => {
  const adapter = adapterFor(t);
  fake.silentSockets = true;
  const log = updateLog();
  await adapter.submit(comfyJob(), log.report);
  t.match(await log.end, { type: 'succeeded' });
  fake.silentSockets = false;

  fake.holdNext();
  const held = updateLog();
  await adapter.submit(comfyJob(), held.report);
  const promptId = await fake.running();
  const clientId = fake.submissions.at(-1)!.clientId!;
  await held.waitFor((u) => u.type === 'running');
  fake.dropSockets();
  await eventually(() => (fake.socketsOpened.get(clientId) ?? 0) >= 2, { what: 'a second socket' });
  fake.release();
  t.match(await held.end, { type: 'succeeded' });
  t.equal(fake.submissions.filter((s) => s.promptId === promptId).length, 1);
});
