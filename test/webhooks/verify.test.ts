import t from 'tap';
import { signatureHeader } from '../../actors/webhook/signature.ts';
import * as exported from 'generation-service/webhooks/verify';
import { verifyWebhook } from '../../actors/webhook/verify.ts';

t.test('the package exports the verification function receivers import', async (t) => {
  t.equal(exported.verifyWebhook, verifyWebhook, 'generation-service/webhooks/verify is actors/webhook/verify.ts');
  t.equal(exported.SIGNATURE_HEADER, 'x-service-signature');
});

t.test('what the service signs, the exported verifier accepts; anything else it refuses', async (t) => {
  const secret = 'whsec_test';
  const body = JSON.stringify({ id: 'dlv_1', event: 'generation.completed', data: { generationId: 'gen_1' }, createdAt: '2026-01-01T00:00:00.000Z' });
  const now = Date.UTC(2026, 0, 1);
  const header = signatureHeader(secret, body, Math.floor(now / 1000));
  t.equal(verifyWebhook(body, header, secret, { now }).id, 'dlv_1');
  t.equal(verifyWebhook(Buffer.from(body), header, secret, { now: now + 299_000 }).id, 'dlv_1', 'a Buffer body, within 5 minutes');
  const code = (fn: () => unknown) => { try { fn(); return 'ok'; } catch (error) { return (error as exported.WebhookVerificationError).code; } };
  t.equal(code(() => verifyWebhook(body, header, secret, { now: now + 301_000 })), 'timestamp_out_of_tolerance');
  t.equal(code(() => verifyWebhook(body, header, secret, { now: now + 10 * 60_000, toleranceSeconds: 3600 })), 'ok', 'tolerance is an option');
  t.equal(code(() => verifyWebhook(`${body} `, header, secret, { now })), 'signature_mismatch', 'one byte more in the body');
  t.equal(code(() => verifyWebhook(body, header.toUpperCase(), secret, { now })), 'malformed_header');
  t.equal(code(() => verifyWebhook(body, `t=1,t=2,v1=${'a'.repeat(64)}`, secret, { now })), 'malformed_header');
  t.equal(code(() => verifyWebhook(body, header.replace(/v1=\w+/, 'v1=zz'), secret, { now })), 'signature_mismatch');
  const notJson = 'not json';
  t.equal(code(() => verifyWebhook(notJson, signatureHeader(secret, notJson, Math.floor(now / 1000)), secret, { now })), 'invalid_body');
});
