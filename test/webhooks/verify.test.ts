import { createHmac } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { signatureHeader } from '../../actors/webhook/signature.ts';
import * as exported from 'generation-service/webhooks/verify';
import * as sdk from '@generation-service/client/webhooks';
import { verifyWebhook, WebhookVerificationError } from '../../client/src/webhooks.ts';

t.test('the package exports the plain-JavaScript verifier of the SDK', async (t) => {
  t.equal(exported.verifyWebhook, sdk.verifyWebhook, 'generation-service/webhooks/verify is @generation-service/client/webhooks');
  t.equal(
    fileURLToPath(import.meta.resolve('generation-service/webhooks/verify')),
    fileURLToPath(new URL('../../client/dist/webhooks.js', import.meta.url)),
    'a built .js file',
  );
  t.equal(exported.SIGNATURE_HEADER, 'x-service-signature');
  t.equal(exported.DEFAULT_TOLERANCE_SECONDS, 300);
});

// The verifier's source (client/src/webhooks.ts, as tests and TypeScript users load it) and the built module the
// package exports answer every case alike.
for (const [name, verify, VerificationError] of [
  ["the verifier's source", verifyWebhook, WebhookVerificationError],
  ['the exported verifier', exported.verifyWebhook, exported.WebhookVerificationError],
] as const) {
  t.test(`what the service signs, ${name} accepts; anything else it refuses`, async (t) => {
    const secret = 'whsec_test';
    const body = JSON.stringify({ id: 'dlv_1', event: 'generation.completed', data: { generationId: 'gen_1' }, createdAt: '2026-01-01T00:00:00.000Z' });
    const now = Date.UTC(2026, 0, 1);
    const header = signatureHeader(secret, body, Math.floor(now / 1000));
    t.equal(verify(body, header, secret, { now }).id, 'dlv_1');
    t.equal(verify(Buffer.from(body), header, secret, { now: now + 299_000 }).id, 'dlv_1', 'a Buffer body, within 5 minutes');
    t.equal(verify(new TextEncoder().encode(body), [header], secret, { now }).id, 'dlv_1', 'a Uint8Array body, the header as an array');
    const code = (fn: () => unknown) => {
      try {
        fn();
        return 'ok';
      } catch (error) {
        t.ok(error instanceof VerificationError, "thrown as the module's WebhookVerificationError");
        return (error as exported.WebhookVerificationError).code;
      }
    };
    t.equal(
      code(() => verify(body, header, secret, { now: now + 301_000 })),
      'timestamp_out_of_tolerance',
    );
    t.equal(
      code(() => verify(body, header, secret, { now: now - 299_000 })),
      'ok',
      'a timestamp 299 s ahead of the clock is within tolerance',
    );
    t.equal(
      code(() => verify(body, header, secret, { now: now - 301_000 })),
      'timestamp_out_of_tolerance',
      'a timestamp 301 s ahead of the clock (in the future) is refused',
    );
    t.equal(
      code(() => verify(body, header, secret, { now: now - 24 * 3600_000 })),
      'timestamp_out_of_tolerance',
      'a timestamp a day in the future is refused',
    );
    t.equal(
      code(() => verify(body, header, secret, { now: now + 10 * 60_000, toleranceSeconds: 3600 })),
      'ok',
      'tolerance is an option',
    );
    t.equal(
      code(() => verify(`${body} `, header, secret, { now })),
      'signature_mismatch',
      'one byte more in the body',
    );
    t.equal(
      code(() => verify(body, header, 'whsec_other', { now })),
      'signature_mismatch',
      'another secret',
    );
    t.equal(
      code(() => verify(body, undefined, secret, { now })),
      'missing_header',
    );
    t.equal(
      code(() => verify(body, header.toUpperCase(), secret, { now })),
      'malformed_header',
    );
    t.equal(
      code(() => verify(body, `t=1,t=2,v1=${'a'.repeat(64)}`, secret, { now })),
      'malformed_header',
    );
    t.equal(
      code(() => verify(body, header.replace(/v1=\w+/, 'v1=zz'), secret, { now })),
      'signature_mismatch',
    );
    t.equal(
      code(() => verify(body, `${header},v1=${'0'.repeat(64)}`, secret, { now })),
      'ok',
      'one matching v1 among several',
    );
    const notJson = 'not json';
    t.equal(
      code(() => verify(notJson, signatureHeader(secret, notJson, Math.floor(now / 1000)), secret, { now })),
      'invalid_body',
    );
  });
}

// A known answer for the scheme of docs/webhooks.md: v1 = hex HMAC-SHA256, keyed with the whole secret, of
// "<t>.<raw body>". The expected value is a literal, checked here against node:crypto over the documented
// string, so a signer and verifiers that agree with each other but not with the documented scheme (the
// timestamp left out of the signed string, say) are caught.
t.test('a fixed secret, timestamp and body sign to a known signature, which both verifiers accept', async (t) => {
  const secret = 'whsec_5f2b8c1d9e4a7f3b6c0d2e8a1b4c7d9e';
  const timestamp = 1767225600;
  const body = '{"id":"dlv_01jh7v6q2c9m4x8k1n3p5r7t9w","event":"generation.completed","data":{"generationId":"gen_1"},"createdAt":"2026-01-01T00:00:01.480Z"}';
  const known = '4bc854920eec1e523c6ff4efa14d413f9c57417e1735ba6c13a1b071410f4cde';
  t.equal(createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex'), known, 'the documented scheme gives the known signature');
  const header = signatureHeader(secret, body, timestamp);
  t.equal(header, `t=${timestamp},v1=${known}`, 'the service signs exactly the documented header');
  const now = timestamp * 1000;
  const independent = `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex')}`;
  t.equal(verifyWebhook(body, independent, secret, { now }).id, 'dlv_01jh7v6q2c9m4x8k1n3p5r7t9w', 'the verifier accepts the known signature');
  t.equal(exported.verifyWebhook(body, independent, secret, { now }).id, 'dlv_01jh7v6q2c9m4x8k1n3p5r7t9w', 'the exported verifier accepts the known signature');
  // The timestamp is part of what is signed: the same v1 under another t is refused by both.
  const otherT = `t=${timestamp + 1},v1=${known}`;
  t.throws(() => verifyWebhook(body, otherT, secret, { now }), { code: 'signature_mismatch' }, 'the verifier refuses the signature under another timestamp');
  t.throws(
    () => exported.verifyWebhook(body, otherT, secret, { now }),
    { code: 'signature_mismatch' },
    'the exported verifier refuses the signature under another timestamp',
  );
});

t.test("the verifier's edges: tolerance boundary, header parts, bodies that are JSON but not an event", async (t) => {
  const secret = 'whsec_edges';
  const T = 1767225600;
  const signed = (body: string) => ({ body, header: signatureHeader(secret, body, T) });
  const { body, header } = signed('{"id":"dlv_1","event":"generation.completed"}');
  const code = (fn: () => unknown) => {
    try {
      fn();
      return 'ok';
    } catch (error) {
      t.equal((error as Error).name, 'WebhookVerificationError', 'the error is named for what it is');
      return (error as WebhookVerificationError).code;
    }
  };
  // The clock is read in whole seconds, rounded down: 300.999 s after t is 300 s, within the default tolerance.
  t.equal(
    code(() => verifyWebhook(body, header, secret, { now: (T + 300) * 1000 + 999 })),
    'ok',
    'exactly 300 s late is within tolerance',
  );
  t.equal(
    code(() => verifyWebhook(body, header, secret, { now: (T - 300) * 1000 })),
    'ok',
    'exactly 300 s early is within tolerance',
  );
  t.equal(
    code(() => verifyWebhook(body, header, secret, { now: (T + 301) * 1000 })),
    'timestamp_out_of_tolerance',
  );
  const now = T * 1000;
  t.equal(
    code(() => verifyWebhook(body, `${header},tt`, secret, { now })),
    'ok',
    'a part without "=" is ignored',
  );
  t.equal(
    code(() => verifyWebhook(body, `${header},=x`, secret, { now })),
    'ok',
    'a part with an empty name is ignored',
  );
  t.equal(
    code(() => verifyWebhook(body, header.replace('v1=', 'v0='), secret, { now })),
    'malformed_header',
    'a signature under another version is not a v1',
  );
  t.equal(
    code(() => verifyWebhook(body, `t=${T}`, secret, { now })),
    'malformed_header',
    't without v1',
  );
  t.equal(
    code(() => verifyWebhook(body, header.replace(`t=${T},`, ''), secret, { now })),
    'malformed_header',
    'v1 without t',
  );
  for (const notAnEvent of [
    'null',
    '42',
    '"dlv_1"',
    '[]',
    '{"id":"dlv_1"}',
    '{"event":"generation.completed"}',
    '{"id":1,"event":"generation.completed"}',
    '{"id":"dlv_1","event":true}',
  ]) {
    const one = signed(notAnEvent);
    t.equal(
      code(() => verifyWebhook(one.body, one.header, secret, { now })),
      'invalid_body',
      `${notAnEvent} is not an event`,
    );
  }
});
