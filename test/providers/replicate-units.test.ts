import { Value } from '@sinclair/typebox/value';
import t from 'tap';
import { createRoute, replicateDeploymentTarget } from '../../providers/replicate/deployment.ts';
import { endFailure, logTail, problemDetail, readPrediction, tokenUsage, type Prediction } from '../../providers/replicate/prediction.ts';
import { parseReplicateSettings, REPLICATE_DEFAULT_BASE_URL } from '../../providers/replicate/settings.ts';

const SECRET = `whsec_${Buffer.from('a signing key of sixteen bytes or more').toString('base64')}`;

t.test('settings', async (t) => {
  t.test('not configured: no token and no base URL', async (t) => {
    t.same(parseReplicateSettings({}), { settings: undefined, problems: [] });
    t.same(parseReplicateSettings({ REPLICATE_API_TOKEN: '  ' }), { settings: undefined, problems: [] });
  });

  t.test('a token alone: the public API, no webhooks, no limit', async (t) => {
    t.same(parseReplicateSettings({ REPLICATE_API_TOKEN: 'r8_abc' }).settings, {
      apiToken: 'r8_abc',
      baseUrl: REPLICATE_DEFAULT_BASE_URL,
      webhookSecret: undefined,
      maxConcurrentJobs: undefined,
    });
  });

  t.test('everything set', async (t) => {
    const { settings, problems } = parseReplicateSettings({
      REPLICATE_API_TOKEN: 'r8_abc',
      REPLICATE_BASE_URL: 'http://127.0.0.1:9000/v1/',
      REPLICATE_WEBHOOK_SECRET: SECRET,
      REPLICATE_MAX_CONCURRENT_JOBS: '12',
    });
    t.same(problems, []);
    t.same(settings, { apiToken: 'r8_abc', baseUrl: 'http://127.0.0.1:9000/v1', webhookSecret: SECRET, maxConcurrentJobs: 12 });
  });

  t.test("each bad value is one problem naming its variable, never a secret's value", async (t) => {
    const { settings, problems } = parseReplicateSettings({
      REPLICATE_BASE_URL: 'ftp://example.com',
      REPLICATE_WEBHOOK_SECRET: 'whsec_!!notbase64-and-secret',
      REPLICATE_MAX_CONCURRENT_JOBS: '0',
    });
    t.equal(settings, undefined);
    t.equal(problems.length, 4);
    for (const name of ['REPLICATE_API_TOKEN', 'REPLICATE_BASE_URL', 'REPLICATE_WEBHOOK_SECRET', 'REPLICATE_MAX_CONCURRENT_JOBS']) {
      t.ok(
        problems.some((p) => p.startsWith(`${name}`)),
        name,
      );
    }
    t.notOk(
      problems.some((p) => p.includes('notbase64-and-secret')),
      'the secret is not echoed',
    );
    const token = parseReplicateSettings({ REPLICATE_API_TOKEN: 'r8_has space' });
    t.same(token.problems, ['REPLICATE_API_TOKEN: must not contain whitespace']);
    t.same(
      parseReplicateSettings({ REPLICATE_API_TOKEN: 'r8_x', REPLICATE_WEBHOOK_SECRET: 'whsec_c2hvcnQ=' }).problems.length,
      1,
      'a key shorter than 16 bytes',
    );
  });
});

t.test('deployment target', async (t) => {
  const version = 'b'.repeat(64);
  t.ok(Value.Check(replicateDeploymentTarget, { model: 'black-forest-labs/flux-schnell' }));
  t.ok(Value.Check(replicateDeploymentTarget, { version }));
  t.ok(Value.Check(replicateDeploymentTarget, { version: `owner/name:${version}` }));
  t.ok(Value.Check(replicateDeploymentTarget, { deployment: 'acme/prod', files: { image: 'input_image', mask: 'mask' } }));
  t.notOk(Value.Check(replicateDeploymentTarget, {}), 'none');
  t.notOk(Value.Check(replicateDeploymentTarget, { model: 'a/b', version }), 'two at once');
  t.notOk(Value.Check(replicateDeploymentTarget, { model: 'no-owner' }));
  t.notOk(Value.Check(replicateDeploymentTarget, { version: 'short' }));
  t.notOk(Value.Check(replicateDeploymentTarget, { model: 'a/b', files: { audio: 'x' } }), 'unknown file field');
  t.same(createRoute({ model: 'a/b' }), { path: '/models/a/b/predictions', body: {} });
  t.same(createRoute({ deployment: 'a/b' }), { path: '/deployments/a/b/predictions', body: {} });
  t.same(createRoute({ version }), { path: '/predictions', body: { version } });
});

t.test('prediction', async (t) => {
  const base: Prediction = { id: 'p1', status: 'failed', output: null, error: undefined, logs: '', metrics: {} };

  t.test('readPrediction refuses what is not a prediction', async (t) => {
    t.equal(readPrediction(null), undefined);
    t.equal(readPrediction({ id: 'x', status: 'weird' }), undefined);
    t.equal(readPrediction({ status: 'starting' }), undefined);
    t.match(readPrediction({ id: 'x', status: 'aborted', error: { message: 'e' } }), { id: 'x', status: 'aborted', error: '{"message":"e"}' });
  });

  t.test('every end that is not a success, as our code', async (t) => {
    const secrets = ['r8_secret'];
    t.equal(endFailure({ ...base, error: 'NSFW content detected' }, false, secrets).code, 'provider_content_policy');
    t.equal(endFailure({ ...base, error: 'The input or output was flagged as sensitive' }, false, secrets).code, 'provider_content_policy');
    t.equal(endFailure({ ...base, error: 'Prediction interrupted; please retry (code: PA)' }, false, secrets).code, 'provider_error');
    t.equal(endFailure({ ...base, error: undefined }, false, secrets).code, 'provider_error');
    t.notMatch(endFailure({ ...base, error: 'token r8_secret rejected' }, false, secrets).message, 'r8_secret');
    t.equal(endFailure({ ...base, status: 'canceled' }, false, secrets).code, 'provider_cancelled');
    t.equal(endFailure({ ...base, status: 'aborted' }, false, secrets).code, 'provider_cancelled');
    t.equal(endFailure({ ...base, status: 'canceled' }, true, secrets).code, 'provider_timeout');
    t.equal(endFailure({ ...base, status: 'aborted' }, true, secrets).code, 'provider_timeout');
    t.equal(endFailure({ ...base, error: 'NSFW' }, true, secrets).code, 'provider_content_policy', 'a failure keeps its cause past the deadline');
  });

  t.test('logTail keeps the last three non-empty lines, trimmed', async (t) => {
    t.equal(logTail('a\n\n  b  \r\nc\nd\n', []), 'b\nc\nd');
    t.equal(logTail('', []), '');
    t.equal(logTail('using r8_secret', ['r8_secret']), 'using [redacted]');
  });

  t.test('tokenUsage and problemDetail', async (t) => {
    t.same(tokenUsage({ input_token_count: 3, output_token_count: 7 }), { inputTokens: 3, outputTokens: 7 });
    t.equal(tokenUsage({ predict_time: 1 }), undefined);
    t.equal(
      problemDetail({ title: 'Unauthenticated', detail: 'You did not pass an authentication token', status: 401 }, ''),
      'Unauthenticated: You did not pass an authentication token',
    );
    t.equal(problemDetail(undefined, 'plain text'), 'plain text');
  });
});
