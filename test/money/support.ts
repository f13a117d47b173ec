import { createHmac, randomBytes } from 'node:crypto';
import type { TestServer } from '../helpers/server.ts';
import { withCookie, withKey } from '../helpers/identity.ts';

/** The billing secret test servers are started with, so tests can sign provider events themselves. */
export const BILLING_SECRET = 'test-billing-secret-0123456789abcdef0123456789';
export const MONEY_ENV = { BILLING_SIGNING_SECRET: BILLING_SECRET, LOCAL_PROVIDER_LATENCY_MS: '0' };

/** Credentials for a JSON request: a key (gs_live_…) or a session cookie. */
export function auth(credential: string, extra: Record<string, string> = {}): Record<string, string> {
  return credential.startsWith('gs_live_') ? withKey(credential, extra) : withCookie(credential, extra);
}

export function post(server: TestServer, path: string, credential: string, body: unknown, method = 'POST') {
  return server.json(path, { method, headers: auth(credential), body: JSON.stringify(body) });
}

export function get(server: TestServer, path: string, credential: string) {
  const headers = auth(credential);
  delete headers['content-type'];
  return server.json(path, { headers });
}

/** Pays (or declines) on the local provider's checkout page, as a customer's browser would: GET the page, POST its form. */
export async function completeCheckout(checkoutUrl: string, outcome: 'pay' | 'decline'): Promise<{ status: number; page: string }> {
  const page = await fetch(checkoutUrl);
  const html = await page.text();
  if (page.status !== 200) throw new Error(`checkout page: ${page.status} ${html}`);
  const action = new RegExp(`action="([^"]+/${outcome}\\?token=[0-9a-f]+)"`).exec(html)?.[1];
  if (!action) throw new Error(`no ${outcome} form on the checkout page: ${html}`);
  const response = await fetch(new URL(action.replace(/&amp;/g, '&'), checkoutUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: '',
  });
  return { status: response.status, page: await response.text() };
}

/** A provider event signed with the test secret, as the provider would POST it; `at` is the signing time (the server's clock). */
export function signedEvent(paymentId: string, type: 'payment.succeeded' | 'payment.failed', options: { id?: string; at?: number; secret?: string } = {}) {
  const at = options.at ?? Date.now();
  const raw = JSON.stringify({ id: options.id ?? `evt_${randomBytes(10).toString('hex')}`, type, createdAt: new Date(at).toISOString(), data: { paymentId } });
  const t = Math.floor(at / 1000);
  const signature = `t=${t},v1=${createHmac('sha256', options.secret ?? BILLING_SECRET)
    .update(`${t}.${raw}`)
    .digest('hex')}`;
  return { raw, signature };
}

export function sendEvent(server: TestServer, event: { raw: string; signature: string }) {
  return server.json('/v1/billing/events/local', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-billing-signature': event.signature },
    body: event.raw,
  });
}

/** Every balance equals its ledger sum and none is negative; nothing was applied twice. */
export async function checkBooks(server: TestServer, workspaceId: string) {
  const em = server.services.db.em();
  await server.services.writer.flush();
  const [account] = await em.execute<Array<Record<string, number>>>(
    'select available_credits, reserved_credits, wallet_cents, reserved_wallet_cents from workspace_accounts where workspace_id = ?',
    [workspaceId],
  );
  const [ledger] = await em.execute<Array<Record<string, string>>>(
    `select coalesce(sum(credits), 0)::int8 as available_credits, coalesce(sum(reserved_credits), 0)::int8 as reserved_credits,
            coalesce(sum(wallet_cents), 0)::int8 as wallet_cents, coalesce(sum(reserved_wallet_cents), 0)::int8 as reserved_wallet_cents
       from credit_ledger where workspace_id = ?`,
    [workspaceId],
  );
  const balances = Object.fromEntries(Object.entries(account ?? {}).map(([k, v]) => [k, Number(v)]));
  const sums = Object.fromEntries(Object.entries(ledger ?? {}).map(([k, v]) => [k, Number(v)]));
  return { balances, sums };
}
