import t from 'tap';
import { SIGNATURE_HEADER, verifyWebhook } from '../../client/src/webhooks.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { crossedThresholds, noBudgetSettings, type BudgetFigures } from '../../domain/budgets.ts';
import { emitCrossings } from '../../actors/workspace/budget-watch.ts';
import { writeBudgetSettings } from '../../persistence/budgets.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { signUp } from '../helpers/identity.ts';
import { serverQuery } from '../generations/flow.ts';
import { eventually, startReceiver } from '../webhooks/support.ts';
import { get, MONEY_ENV, post } from './support.ts';
import type { Query } from './usage-support.ts';

/**
 * Budget alerts (docs/money.md): thresholds on the credits used of the period's grant, the wallet balance and
 * the API keys' caps; each crossing is announced once per threshold and period by a signed
 * budget.threshold_crossed event and shows in GET /v1/budgets (the dashboard's banner).
 */

const image = (workspaceId: string, prompt: string) => ({ workspaceId, mode: 'text_to_image', model: 'local/image-fast', params: { prompt, numImages: 1 } });

async function runOut(server: TestServer, clock: ManualClock, query: Query, workspaceId: string): Promise<void> {
  // Each try moves the clock a step when jobs are left (400 steps before, at 10 ms: a bound against hanging only).
  await eventually(
    async () => {
      await server.services.actors.drain();
      await server.services.writer.flush();
      const [row] = await query<{ n: string | number }>(
        `select count(*) as n from generations where workspace_id = ? and status in ('queued', 'reserved', 'submitted', 'running')`,
        [workspaceId],
      );
      if (Number(row!.n) === 0) return true;
      clock.advance(1_000);
      return undefined;
    },
    'the jobs finishing',
    60_000,
  );
}

t.test('the rules: a threshold is crossed at its exact share, per period, for the workspace and each capped key', async (t) => {
  const figures: BudgetFigures = {
    grantCredits: 100,
    availableCredits: 20,
    creditPeriod: 'month:2026-06',
    wallet: { activated: true, balanceCents: 499, period: 'deposit:dep_1' },
    keys: [{ keyId: 'key_1', name: 'ci', period: 'day:2026-06-30', creditBudget: 10, walletSpendCapCents: null, credits: 5, walletCents: 0 }],
  };
  const crossed = crossedThresholds({ creditsUsedPercents: [50, 80, 81], walletBelowCents: [500, 499], keySpendPercents: [50, 60] }, figures);
  t.same(
    crossed.map((c) => [c.kind, c.subject, c.threshold, c.period]),
    [
      ['credits_used', '', 50, 'month:2026-06'],
      ['credits_used', '', 80, 'month:2026-06'],
      ['wallet_balance', '', 500, 'deposit:dep_1'],
      ['key_credit_budget', 'key_1', 50, 'day:2026-06-30'],
    ],
    '80 % used is 80 and not 81; 499 cents is below 500 and not below 499; 5 of 10 is 50 % and not 60 %',
  );
  t.same(crossedThresholds(noBudgetSettings(), figures), [], 'no thresholds, nothing crossed');
  t.same(
    crossedThresholds(
      { creditsUsedPercents: [], walletBelowCents: [1000], keySpendPercents: [] },
      { ...figures, wallet: { ...figures.wallet, activated: false } },
    ),
    [],
    'a wallet never funded does not warn',
  );
});

t.test('concurrent jobs crossing thresholds emit one signed event each; a new period re-arms them; the banner lists them', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 5, 30, 22, 0, 0));
  const server = await startTestServer(t, { clock, env: { ...MONEY_ENV, ALLOW_PRIVATE_EGRESS: 'true', RATE_LIMIT_FREE: '100000' } });
  const query = serverQuery(server);
  const receiver = await startReceiver(t);
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const other = await signUp(server);

  const endpoint = await post(server, '/v1/webhooks', owner.cookie, { workspaceId: ws, url: receiver.url, eventTypes: ['budget.threshold_crossed'] });
  t.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
  const secret = endpoint.body.secret as string;

  // Refused: out of range, repeated, too many; a member of another workspace; each with the error envelope.
  for (const [body, why] of [
    [{ creditsUsedPercents: [0] }, 'a percentage of 0'],
    [{ creditsUsedPercents: [101] }, 'a percentage over 100'],
    [{ creditsUsedPercents: [50, 50] }, 'a repeated threshold'],
    [{ walletBelowCents: Array.from({ length: 11 }, (_, i) => i + 1) }, 'more than ten thresholds'],
    [{ colour: 'red' }, 'an unknown field'],
  ] as const) {
    const refused = await post(server, '/v1/budgets', owner.cookie, { workspaceId: ws, ...body }, 'PATCH');
    t.equal(refused.status, 400, `${why}: 400`);
    t.equal(refused.body.error?.code, 'validation_error', why);
  }
  const foreign = await post(server, '/v1/budgets', other.cookie, { workspaceId: ws, creditsUsedPercents: [10] }, 'PATCH');
  t.equal(foreign.status, 404, "another workspace's budgets answer as missing");

  const set = await post(server, '/v1/budgets', owner.cookie, { workspaceId: ws, creditsUsedPercents: [50, 25], walletBelowCents: [300] }, 'PATCH');
  t.equal(set.status, 200, JSON.stringify(set.body));
  t.same(set.body.creditsUsedPercents, [25, 50], 'kept in order');
  t.same(set.body.status.grantCredits, 100, "the free plan's grant");
  t.same(set.body.alerts, [], 'nothing crossed yet');

  // Fourteen images of 4 credits, sent at once: 56 of 100 credits, past 25 % and 50 %.
  const created = await Promise.all(Array.from({ length: 14 }, (_, i) => post(server, '/v1/generations', owner.cookie, image(ws, `img ${i}`))));
  t.ok(
    created.every((c) => c.status === 201),
    'all created',
  );
  await runOut(server, clock, query, ws);
  const banner = await eventually(async () => {
    const answer = await get(server, `/v1/budgets?workspaceId=${ws}`, owner.cookie);
    return answer.body.alerts.length >= 2 ? answer.body : undefined;
  }, 'two alerts');
  t.same(
    banner.alerts.map((a: { kind: string; threshold: number; current: boolean; period: string }) => [a.kind, a.threshold, a.current, a.period]).sort(),
    [
      ['credits_used', 25, true, 'month:2026-06'],
      ['credits_used', 50, true, 'month:2026-06'],
    ],
    'two thresholds crossed, in the current period',
  );
  t.match(banner.alerts[0].message, /^\d+ % of this period's 100 credits used \(\d+ left\)\.$/, 'said in words');
  t.equal(banner.status.usedPercent, 56);

  const received = await receiver.waitFor(2);
  const events = received.map(
    (r) => verifyWebhook(r.rawBody, String(r.headers[SIGNATURE_HEADER]), secret, { now: clock.now() }) as unknown as Record<string, any>,
  );
  t.same(events.map((e) => [e.event, e.data.kind, e.data.threshold, e.data.unit, e.data.workspaceId]).sort(), [
    ['budget.threshold_crossed', 'credits_used', 25, 'percent', ws],
    ['budget.threshold_crossed', 'credits_used', 50, 'percent', ws],
  ]);
  t.equal(events[0]!.data.grantCredits, 100, 'the event carries the figures seen');

  // Checking again, from the API and after more money moves, emits nothing more in this period.
  await post(server, '/v1/budgets', owner.cookie, { workspaceId: ws, creditsUsedPercents: [25, 50] }, 'PATCH');
  await post(server, '/v1/generations', owner.cookie, image(ws, 'one more'));
  await runOut(server, clock, query, ws);
  // Eight checks at once of a threshold just added, straight against the database: one emits it.
  await writeBudgetSettings(
    server.services.db.em(),
    ws,
    { creditsUsedPercents: [25, 50, 55], walletBelowCents: [300], keySpendPercents: [] },
    new Date(clock.now()),
  );
  const racing = await Promise.all(
    Array.from({ length: 8 }, () =>
      emitCrossings(
        server.services.db,
        server.services.catalog,
        ws,
        { creditsUsedPercents: [25, 50, 55], walletBelowCents: [], keySpendPercents: [] },
        clock.now(),
      ),
    ),
  );
  t.equal(racing.filter((endpoints) => endpoints.length > 0).length, 1, 'of eight checks at once, one wrote the 55 % event');
  const rows = await query<{ threshold: number; period: string; n: string | number }>(
    `select threshold, period, count(*) as n from webhook_events e join budget_crossings c on c.event_id = e.id
      where e.workspace_id = ? and e.event_type = 'budget.threshold_crossed' group by 1, 2 order by 1`,
    [ws],
  );
  t.same(
    rows.map((r) => [Number(r.threshold), r.period, Number(r.n)]),
    [
      [25, 'month:2026-06', 1],
      [50, 'month:2026-06', 1],
      [55, 'month:2026-06', 1],
    ],
    'one event per threshold and period',
  );
  const [all] = await query<{ n: string | number }>(
    `select count(*) as n from webhook_events where workspace_id = ? and event_type = 'budget.threshold_crossed'`,
    [ws],
  );
  t.equal(Number(all!.n), 3, 'and no other');

  // July: a new credit period. The next money move finds the thresholds past again, and announces them again.
  clock.advance(2 * 3_600_000);
  await post(server, '/v1/generations', owner.cookie, image(ws, 'in july'));
  await runOut(server, clock, query, ws);
  const july = await eventually(async () => {
    const answer = await get(server, `/v1/budgets?workspaceId=${ws}`, owner.cookie);
    const current = answer.body.alerts.filter((a: { current: boolean }) => a.current);
    return current.length === 3 ? answer.body : undefined;
  }, 'the July alerts');
  t.same(
    july.alerts
      .filter((a: { current: boolean }) => a.current)
      .map((a: { threshold: number; period: string }) => [a.threshold, a.period])
      .sort(),
    [
      [25, 'month:2026-07'],
      [50, 'month:2026-07'],
      [55, 'month:2026-07'],
    ],
    're-armed by the new period',
  );
  t.equal(july.alerts.filter((a: { current: boolean }) => !a.current).length, 3, "June's stay listed, no longer current");
  await receiver.waitFor(6);

  // Another workspace never sees them; a key needs usage.read to read them.
  const otherView = await get(server, `/v1/budgets?workspaceId=${other.workspaceId}`, other.cookie);
  t.same(otherView.body.alerts, [], "another workspace's alerts are its own");
});

t.test("an API key's credit budget and the wallet's balance warn too, each once per period; a deposit re-arms the wallet", async (t) => {
  const server = await startTestServer(t, { env: { ...MONEY_ENV, RATE_LIMIT_FREE: '100000' } });
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const made = await post(server, '/v1/api-keys', owner.cookie, {
    workspaceId: ws,
    name: 'capped',
    scopes: ['all'],
    limits: { creditBudget: 10, period: 'day' },
  });
  t.equal(made.status, 201, JSON.stringify(made.body));
  const key = made.body.key as string;
  const keyId = made.body.id as string;
  const set = await post(server, '/v1/budgets', owner.cookie, { workspaceId: ws, keySpendPercents: [50, 100], walletBelowCents: [2500] }, 'PATCH');
  t.equal(set.status, 200, JSON.stringify(set.body));

  // Two images of 4 credits through the key: 8 of its 10, past 50 % and not 100 %.
  for (let i = 0; i < 2; i++) {
    const created = await post(server, '/v1/generations', key, image(ws, `k${i}`));
    t.equal(created.status, 201, JSON.stringify(created.body));
  }
  const alerts = await eventually(async () => {
    const answer = await get(server, `/v1/budgets?workspaceId=${ws}`, owner.cookie);
    return answer.body.alerts.length > 0 ? answer.body.alerts : undefined;
  }, 'the key alert');
  t.match(alerts, [{ kind: 'key_credit_budget', apiKeyId: keyId, threshold: 50, unit: 'percent', current: true }]);
  t.match(alerts[0].message, /^API key "capped" used 50 % of its credit budget \(8 of 10 credits\)\.$/);

  // The wallet, below $25: after a $10 deposit, one alert however many jobs; a second deposit (still below) re-arms it.
  const { completeCheckout } = await import('./support.ts');
  const deposit = async () => {
    const order = await post(server, '/v1/wallet/top-ups', owner.cookie, { workspaceId: ws, amountCents: 1000 });
    t.equal(order.status, 201, JSON.stringify(order.body));
    await completeCheckout(order.body.checkoutUrl, 'pay');
  };
  const walletAlerts = async (n: number) =>
    eventually(async () => {
      const answer = await get(server, `/v1/budgets?workspaceId=${ws}`, owner.cookie);
      const found = answer.body.alerts.filter((a: { kind: string }) => a.kind === 'wallet_balance');
      return found.length >= n ? found : undefined;
    }, `${n} wallet alerts`);
  await deposit();
  for (let i = 0; i < 6; i++) {
    const created = await post(server, '/v1/generations', owner.cookie, { ...image(ws, `w${i}`), paymentMode: 'wallet' });
    t.equal(created.status, 201, JSON.stringify(created.body));
  }
  const first = await walletAlerts(1);
  t.match(first[0], { threshold: 2500, unit: 'cents', current: true });
  await deposit();
  await post(server, '/v1/generations', owner.cookie, { ...image(ws, 'after the second deposit'), paymentMode: 'wallet' });
  const both = await walletAlerts(2);
  t.equal(both.length, 2, 'the second deposit started a new period: one more alert, not more');
  t.same(
    both.map((a: { current: boolean }) => a.current),
    [true, false],
    'the newest is current, the first of the past period',
  );
  const [rows] = await serverQuery(server)<{ n: string | number }>(
    `select count(*) as n from webhook_events where workspace_id = ? and event_type = 'budget.threshold_crossed'`,
    [ws],
  );
  t.equal(Number(rows!.n), 3, 'three events: the key at 50 %, and the wallet once per deposit');
});
