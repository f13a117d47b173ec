// The fake checked by Replicate's own client (replicate 1.4.0) and by what the real API refuses.
import Replicate from 'replicate';
import t from 'tap';
import { request } from 'undici';
import { startReplicateFake, TOKEN, VERSION, type ReplicateFake } from '../fakes/replicate.ts';

let fake: ReplicateFake;
t.before(async () => {
  fake = await startReplicateFake({ token: TOKEN });
});
t.teardown(() => fake.close());

t.test('the official client creates, gets and cancels predictions on it', async (t) => {
  fake.scenario(`version:${VERSION}`, { end: { status: 'succeeded', output: 'hello Alice' } });
  fake.scenario('model:replicate/hello-world', { advance: 'manual', end: { status: 'succeeded', output: 'x' } });
  fake.scenario('deployment:acme/prod', { end: { status: 'failed', error: 'boom' } });
  const client = new Replicate({ auth: TOKEN, baseUrl: fake.baseUrl });

  const byVersion = await client.predictions.create({
    version: VERSION,
    input: { text: 'Alice' },
    webhook: 'https://example.com/hook',
    webhook_events_filter: ['start', 'completed'],
  });
  t.equal(byVersion.status, 'starting');
  const done = await client.wait(byVersion, { interval: 10 });
  t.equal(done.status, 'succeeded');
  t.equal(done.output, 'hello Alice');

  const byModel = await client.predictions.create({ model: 'replicate/hello-world', input: { text: 'Bob' } });
  const canceled = await client.predictions.cancel(byModel.id);
  t.equal(canceled.status, 'canceled');

  const byDeployment = await client.deployments.predictions.create('acme', 'prod', { input: { prompt: 'x' } });
  await t.rejects(client.wait(byDeployment, { interval: 10 }), /Prediction failed: boom/, 'the client reads the failed prediction');
  t.equal(fake.prediction(byDeployment.id)?.status, 'failed');
});

t.test('it refuses what Replicate refuses', async (t) => {
  const call = async (method: 'GET' | 'POST', path: string, headers: Record<string, string>, body?: string) => {
    const response = await request(`${fake.origin}${path}`, { method, headers, body });
    return { status: response.statusCode, json: (await response.body.json()) as Record<string, unknown> };
  };
  const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const valid = JSON.stringify({ version: VERSION, input: { prompt: 'refusals' } });

  t.match(await call('POST', '/v1/predictions', { 'content-type': 'application/json' }, valid), {
    status: 401,
    json: { title: 'Unauthenticated', detail: 'You did not pass an authentication token' },
  });
  t.match(await call('POST', '/v1/predictions', { ...auth, authorization: 'Bearer nope' }, valid), {
    status: 401,
    json: { detail: 'You did not pass a valid authentication token' },
  });
  t.match(await call('POST', '/v1/predictions', { ...auth, authorization: TOKEN }, valid), { status: 401 }, 'the token without its scheme');
  t.match(await call('POST', '/v1/predictions', { ...auth, 'content-type': 'text/plain' }, valid), { status: 415 });
  t.match(await call('POST', '/v1/predictions', auth, '{not json'), { status: 400 });
  t.match(await call('POST', '/v1/predictions', auth, JSON.stringify({ version: VERSION })), { status: 422 }, 'no input');
  t.match(await call('POST', '/v1/predictions', auth, JSON.stringify({ input: {} })), { status: 422 }, 'no version');
  t.match(await call('POST', '/v1/predictions', auth, JSON.stringify({ version: 'c'.repeat(64), input: {} })), {
    status: 422,
    json: { title: 'Invalid version or not permitted' },
  });
  t.match(
    await call('POST', '/v1/predictions', auth, JSON.stringify({ version: VERSION, input: {}, webhook: 'http://insecure.example.com' })),
    { status: 422 },
    'a webhook that is not HTTPS',
  );
  t.match(
    await call('POST', '/v1/predictions', auth, JSON.stringify({ version: VERSION, input: {}, webhook_events_filter: ['finished'] })),
    { status: 422 },
    'an unknown webhook event',
  );
  t.match(await call('POST', '/v1/predictions', { ...auth, 'cancel-after': 'soon' }, valid), { status: 400 }, 'a malformed Cancel-After');
  t.match(await call('POST', '/v1/predictions', { ...auth, 'cancel-after': '1m30s' }, valid), { status: 201 }, 'a Go-style duration');
  t.match(await call('POST', '/v1/models/replicate/unknown/predictions', auth, JSON.stringify({ input: {} })), { status: 404 });
  t.match(await call('GET', '/v1/predictions', auth), { status: 405 });
  t.match(await call('GET', '/v1/predictions/nosuchprediction', auth), { status: 404 });
  t.match(await call('GET', '/v1/nowhere', auth), { status: 404 });
  t.equal(fake.submissions('refusals'), 1, 'only the accepted create counts as a submission');
});
