import { createHmac } from 'node:crypto';
import t from 'tap';
import { Webhook } from 'standardwebhooks';
import { signatureHeader, signPayload } from '../../actors/webhook/signature.ts';
import { standardKey, standardSignature } from '../../actors/webhook/standard-signature.ts';
import { newEndpointSecret, secretsAt, signatureHeaders, SIGNATURE_SCHEMES } from '../../actors/webhook/signing.ts';
import { verifyWebhook } from '../../client/src/webhooks.ts';

// Known answers: each expected value is a literal, computed once from the documented scheme (and, for the
// Standard Webhooks scheme, the example of its specification), so a signer that drifts from the scheme fails
// here even where the service's own verifier would drift with it.
const T = 1767225600; // 2026-01-01T00:00:00Z
const BODY = '{"id":"dlv_1","event":"generation.completed"}';
const CURRENT = 'whsec_5f2b8c1d9e4a7f3b6c0d2e8a1b4c7d9e';
const PREVIOUS = 'whsec_previous0previous0previous0prev';
const CURRENT_V1 = 'cc82ab025913dadb0bde67f4e8c55d9b8f9dd154b730beaf442a7b73a954a3f0';
const PREVIOUS_V1 = '90765bbfac5e0503ae22e72fff539ad69dbc2ef62cf279eb33064ccbde9dac66';
const STANDARD_SECRET = 'whsec_K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=';
const STANDARD_V1 = 'iLrT1ujsmOgc8AossyUBLs7gO1onq2kLw8CswnHCkzs=';

t.test('X-Service: a fixed secret, timestamp and body give a known signature', async (t) => {
  t.equal(signPayload(CURRENT, BODY, T), CURRENT_V1);
  t.equal(signPayload(CURRENT, Buffer.from(BODY), T), CURRENT_V1, 'a Buffer body signs the same');
  t.equal(signPayload(PREVIOUS, BODY, T), PREVIOUS_V1);
  t.equal(signatureHeader(CURRENT, BODY, T), `t=${T},v1=${CURRENT_V1}`);
  t.not(signPayload(CURRENT, BODY, T + 1), CURRENT_V1, 'the timestamp is signed');
  t.equal(createHmac('sha256', CURRENT).update(`${T}.${BODY}`).digest('hex'), CURRENT_V1, 'the literal is HMAC-SHA256 of "<t>.<body>"');
});

t.test("Standard Webhooks: the specification's example, and a fixed delivery, give known signatures", async (t) => {
  // The example of the Standard Webhooks specification and its reference libraries.
  t.equal(
    standardSignature('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}'),
    'g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  );
  t.equal(standardSignature(STANDARD_SECRET, 'dlv_1', T, BODY), STANDARD_V1);
  t.equal(standardSignature(STANDARD_SECRET, 'dlv_1', T, Buffer.from(BODY)), STANDARD_V1, 'a Buffer body signs the same');
  t.equal(new Webhook(STANDARD_SECRET).sign('dlv_1', new Date(T * 1000), BODY), `v1,${STANDARD_V1}`, 'the reference library signs the same');
  t.not(standardSignature(STANDARD_SECRET, 'dlv_2', T, BODY), STANDARD_V1, 'the message id is signed');
  t.not(standardSignature(STANDARD_SECRET, 'dlv_1', T + 1, BODY), STANDARD_V1, 'the timestamp is signed');
  t.same(standardKey(STANDARD_SECRET), Buffer.from('K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=', 'base64'), 'the key is the base64 after whsec_, decoded');
  t.same(standardKey('K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='), standardKey(STANDARD_SECRET), 'a secret without the prefix decodes as it is');
});

t.test('a rotated secret signs beside the current one until its overlap ends, and not a millisecond after', async (t) => {
  const at = T * 1000 + 999; // within the second T: the header says t=T
  const rotated = (expiresAt: number | null) => ({
    scheme: 'x-service' as const,
    secret: CURRENT,
    previousSecret: PREVIOUS,
    previousSecretExpiresAt: expiresAt === null ? null : new Date(expiresAt),
  });
  t.same(secretsAt(rotated(at + 1), at), [CURRENT, PREVIOUS], 'the overlap has a millisecond left: both, current first');
  t.same(secretsAt(rotated(at), at), [CURRENT], 'the overlap ends now: the current one only');
  t.same(secretsAt(rotated(null), at), [CURRENT], 'no end: the previous secret is not live');
  t.same(secretsAt({ scheme: 'x-service', secret: CURRENT, previousSecretExpiresAt: new Date(at + 60_000) }, at), [CURRENT], 'no previous secret');

  t.same(signatureHeaders(rotated(at + 1), 'dlv_1', BODY, at), { 'x-service-signature': `t=${T},v1=${CURRENT_V1},v1=${PREVIOUS_V1}` });
  t.same(signatureHeaders(rotated(at), 'dlv_1', BODY, at), { 'x-service-signature': `t=${T},v1=${CURRENT_V1}` });
  const both = signatureHeaders(rotated(at + 1), 'dlv_1', BODY, at)['x-service-signature']!;
  t.equal(verifyWebhook(BODY, both, PREVIOUS, { now: at }).id, 'dlv_1', 'a receiver still on the previous secret verifies');
  t.equal(verifyWebhook(BODY, both, CURRENT, { now: at }).id, 'dlv_1', 'and one on the current secret');
});

t.test('Standard Webhooks headers: id, timestamp, and one v1 per live secret, space-separated', async (t) => {
  const at = T * 1000 + 999;
  const previous = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const keys = { scheme: 'standard' as const, secret: STANDARD_SECRET, previousSecret: previous, previousSecretExpiresAt: new Date(at + 1) };
  const headers = signatureHeaders(keys, 'dlv_1', BODY, at);
  t.same(headers, {
    'webhook-id': 'dlv_1',
    'webhook-timestamp': String(T),
    'webhook-signature': `v1,${STANDARD_V1} v1,${standardSignature(previous, 'dlv_1', T, BODY)}`,
  });
  t.equal(
    headers['webhook-signature']!.split(' ')[1],
    new Webhook(previous).sign('dlv_1', new Date(T * 1000), BODY),
    "the reference library signs the previous secret's part alike",
  );
  t.same(
    signatureHeaders({ ...keys, previousSecretExpiresAt: new Date(at) }, 'dlv_1', BODY, at)['webhook-signature'],
    `v1,${STANDARD_V1}`,
    'once the overlap ends, one signature',
  );
});

t.test('new secrets have the form of their scheme', async (t) => {
  t.same([...SIGNATURE_SCHEMES], ['x-service', 'standard']);
  const xService = newEndpointSecret('x-service');
  t.match(xService, /^whsec_[A-Za-z0-9_-]{43}$/, 'X-Service: whsec_ and 43 base64url characters');
  const standard = newEndpointSecret('standard');
  t.match(standard, /^whsec_[A-Za-z0-9+/]{43}=$/, 'Standard: whsec_ and the base64 of 32 bytes');
  t.equal(standardKey(standard).length, 32);
  t.not(newEndpointSecret('x-service'), xService, 'random each time');
  t.not(newEndpointSecret('standard'), standard, 'random each time');
  // The reference library checks the timestamp against its own clock: sign now.
  const headers = signatureHeaders({ scheme: 'standard', secret: standard }, 'dlv_1', BODY, Date.now());
  t.same(new Webhook(standard).verify(BODY, headers), JSON.parse(BODY), 'a new Standard secret is one the reference library takes');
});
