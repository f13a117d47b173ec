import { randomUUID } from 'node:crypto';
import { Agent, request } from 'undici';
import { createKey, signUp, type BenchAccount } from './accounts.ts';

/** A workspace on the team plan with bought credits, and a generations key of it; provisioned through the API only. */
export interface FundedWorkspace {
  workspaceId: string;
  key: string;
  body: string;
}

/** The cheapest job: one credit, a short text answer from the built-in local provider. */
export const SOAK_MODEL = 'local/text-mini';

async function postJson(url: string, cookie: string, body: unknown): Promise<any> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', cookie }, body: JSON.stringify(body) });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`POST ${new URL(url).pathname}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** Pays a pending order on the local payment provider's checkout page, as a customer's browser would: GET the page, POST its form. */
async function payAtCheckout(checkoutUrl: string): Promise<void> {
  const page = await fetch(checkoutUrl);
  const html = await page.text();
  if (page.status !== 200) throw new Error(`checkout page: ${page.status} ${html}`);
  const action = /action="([^"]+\/pay\?token=[0-9a-f]+)"/.exec(html)?.[1];
  if (!action) throw new Error('no pay form on the checkout page');
  const paid = await fetch(new URL(action.replace(/&amp;/g, '&'), checkoutUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: '',
  });
  const text = await paid.text();
  if (paid.status !== 200) throw new Error(`paying at the checkout: ${paid.status} ${text}`);
}

/**
 * `count` workspaces of one signed-up account, each moved to the team plan and given `credits` bought
 * credits at the local checkout (the same way a customer would; works on any database), and a key with
 * generations.write and generations.read.
 */
export async function fundedWorkspaces(serviceUrl: string, count: number, credits: number): Promise<FundedWorkspace[]> {
  const account: BenchAccount = await signUp(serviceUrl);
  const ids = [account.workspaceId];
  while (ids.length < count) ids.push((await postJson(`${serviceUrl}/v1/workspaces`, account.cookie, { name: `soak ${ids.length}` })).id as string);
  const out: FundedWorkspace[] = [];
  for (const workspaceId of ids) {
    await payAtCheckout((await postJson(`${serviceUrl}/v1/billing/checkout`, account.cookie, { workspaceId, plan: 'team' })).checkoutUrl);
    for (let left = credits; left > 0; left -= 1_000_000) {
      const order = await postJson(`${serviceUrl}/v1/credits/top-ups`, account.cookie, { workspaceId, credits: Math.max(100, Math.min(left, 1_000_000)) });
      await payAtCheckout(order.checkoutUrl);
    }
    const key = await createKey(serviceUrl, { cookie: account.cookie, workspaceId }, ['generations.write', 'generations.read']);
    out.push({
      workspaceId,
      key,
      body: JSON.stringify({ workspaceId, mode: 'text_to_text', model: SOAK_MODEL, params: { prompt: 'Say hello in five words.' } }),
    });
  }
  return out;
}

/** Answers counted since the last take(): by status code, plus transport errors. */
export interface CreateCounts {
  byStatus: Record<string, number>;
  errors: number;
  /** Ticks at which the in-flight cap held back creates (the service did not keep up with the rate). */
  heldBack: number;
  /** Milliseconds from sending each create to its answer. */
  latenciesMs: number[];
}

export interface SteadyCreates {
  /** The counts since the previous call (or the start), and resets them. */
  take(): CreateCounts;
  /** Stops issuing creates and waits for the ones in flight. */
  stop(): Promise<void>;
}

/**
 * Open-loop creates at a steady `perSecond` (issued every 10 ms, round robin over the workspaces), so each
 * minute brings the service the same work; at most `maxInFlight` are outstanding, so a service that falls
 * behind is not buried (those ticks are counted in heldBack).
 */
export function steadyCreates(
  serviceUrl: string,
  workspaces: FundedWorkspace[],
  perSecond: number,
  options: { maxInFlight?: number; idempotencyKeys?: boolean } = {},
): SteadyCreates {
  const maxInFlight = options.maxInFlight ?? 256;
  const agent = new Agent({ connections: 64, keepAliveTimeout: 30_000 });
  const url = `${serviceUrl}/v1/generations`;
  const headers = workspaces.map((w) => ({ authorization: `Bearer ${w.key}`, 'content-type': 'application/json' }));
  let counts: CreateCounts = { byStatus: {}, errors: 0, heldBack: 0, latenciesMs: [] };
  let inFlight = 0;
  let next = 0;
  let owed = 0;
  const pending = new Set<Promise<void>>();
  const tickMs = 10;
  const one = async () => {
    const i = next++ % workspaces.length;
    inFlight++;
    const sentAt = performance.now();
    try {
      // A well-behaved client sends a new Idempotency-Key with each create (and the same one on a retry).
      const sent = options.idempotencyKeys ? { ...headers[i], 'idempotency-key': `soak-${randomUUID()}` } : headers[i];
      const res = await request(url, { method: 'POST', headers: sent, body: workspaces[i]!.body, dispatcher: agent });
      await res.body.dump();
      counts.byStatus[res.statusCode] = (counts.byStatus[res.statusCode] ?? 0) + 1;
      counts.latenciesMs.push(performance.now() - sentAt);
    } catch {
      counts.errors++;
    } finally {
      inFlight--;
    }
  };
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    owed += ((now - last) / 1000) * perSecond;
    last = now;
    let held = false;
    while (owed >= 1) {
      if (inFlight >= maxInFlight) {
        held = true;
        owed = Math.min(owed, perSecond); // do not build up more than a second's worth of debt
        break;
      }
      owed--;
      const p = one();
      pending.add(p);
      void p.finally(() => pending.delete(p));
    }
    if (held) counts.heldBack++;
  }, tickMs);
  return {
    take() {
      const taken = counts;
      counts = { byStatus: {}, errors: 0, heldBack: 0, latenciesMs: [] };
      return taken;
    },
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
      await agent.close();
    },
  };
}
