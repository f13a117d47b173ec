import { Value } from '@sinclair/typebox/value';
import t from 'tap';
import { createRoute, replicateDeploymentTarget } from '../../providers/replicate/deployment.ts';
import { endFailure, logTail, problemDetail, readPrediction, tokenUsage, type Prediction } from '../../providers/replicate/prediction.ts';
import { parseReplicateSettings, REPLICATE_DEFAULT_BASE_URL } from '../../providers/replicate/settings.ts';
import { EventStreamParser, streamUrlAllowed, type StreamEvent } from '../../providers/replicate/stream.ts';

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

  t.test('readPrediction keeps urls.stream when there is one', async (t) => {
    const stream = 'https://streaming.api.replicate.com/v1/predictions/abc';
    t.equal(readPrediction({ id: 'x', status: 'starting', urls: { get: 'g', stream } })?.streamUrl, stream);
    t.notOk('streamUrl' in readPrediction({ id: 'x', status: 'starting', urls: { get: 'g' } })!);
    t.notOk('streamUrl' in readPrediction({ id: 'x', status: 'starting', urls: { stream: 42 } })!);
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

t.test('the event stream', async (t) => {
  const parse = (...chunks: (string | Buffer)[]) => {
    const events: StreamEvent[] = [];
    const parser = new EventStreamParser((event) => events.push(event));
    for (const chunk of chunks) parser.feed(chunk);
    return events;
  };

  t.test("Replicate's example, several data lines, comments, done", async (t) => {
    t.same(
      parse(
        'event: output\nid: 1690212292:0\ndata: Once upon a time...\n\n: a comment\n\nevent: output\nid: 1690212292:1\ndata: two\ndata:  lines\n\nevent: done\ndata: {}\n\n',
      ),
      [
        { type: 'output', data: 'Once upon a time...', id: '1690212292:0' },
        { type: 'output', data: 'two\n lines', id: '1690212292:1' },
        { type: 'done', data: '{}', id: '1690212292:1' },
      ],
    );
  });

  t.test('one space after the colon is dropped, no more; a field without a colon; no data, no event', async (t) => {
    t.same(parse('event: output\ndata:  leading\n\n'), [{ type: 'output', data: ' leading', id: '' }]);
    t.same(parse('event: output\ndata:no-space\n\n'), [{ type: 'output', data: 'no-space', id: '' }]);
    t.same(parse('event: output\ndata\n\n'), [{ type: 'output', data: '', id: '' }], 'an empty piece is still an event');
    t.same(parse('event: output\nid: 3\n\ndata: x\n\n'), [{ type: 'message', data: 'x', id: '3' }], 'the type does not outlive its event');
    t.same(parse('data: no end yet'), [], 'an event waits for its blank line');
  });

  t.test('CRLF, CR and LF line ends, split anywhere, a BOM and UTF-8 split across chunks', async (t) => {
    const text = '\ufeffevent: output\r\ndata: h\u00e9llo \u2713\r\n\r\nevent: output\rdata: b\r\revent: done\ndata: {}\n\n';
    const whole = parse(text);
    t.same(
      whole.map((e) => [e.type, e.data]),
      [
        ['output', 'h\u00e9llo \u2713'],
        ['output', 'b'],
        ['done', '{}'],
      ],
    );
    const bytes = Buffer.from(text);
    for (let at = 1; at < bytes.length; at++) t.same(parse(bytes.subarray(0, at), bytes.subarray(at)), whole, `split at byte ${at}`);
    t.same(parse(...[...bytes].map((byte) => Buffer.from([byte]))), whole, 'byte by byte');
  });
});

t.test('which stream URLs are opened', async (t) => {
  const api = 'https://api.replicate.com/v1';
  t.ok(streamUrlAllowed('https://streaming.api.replicate.com/v1/predictions/abc', api), "Replicate's streaming host, under the API's");
  t.ok(streamUrlAllowed('https://api.replicate.com/v1/predictions/abc/stream', api));
  t.ok(streamUrlAllowed('http://127.0.0.1:9000/streaming/v1/predictions/abc', 'http://127.0.0.1:9000/v1'), 'the same origin, for a plain-http fake');
  t.notOk(streamUrlAllowed('https://evil.example.com/v1/predictions/abc', api), 'another host');
  t.notOk(streamUrlAllowed('https://api.replicate.com.evil.example.com/x', api), 'a host that only begins like it');
  t.notOk(streamUrlAllowed('https://replicate.com/x', api), 'a parent of the API host');
  t.notOk(streamUrlAllowed('http://streaming.api.replicate.com/x', api), 'not https under an https API');
  t.notOk(streamUrlAllowed('https://user:pass@streaming.api.replicate.com/x', api), 'credentials');
  t.notOk(streamUrlAllowed('http://127.0.0.1:9001/x', 'http://127.0.0.1:9000/v1'), 'another port of a plain-http host');
  t.notOk(streamUrlAllowed('ftp://api.replicate.com/x', api));
  t.notOk(streamUrlAllowed('not a url', api));
});
