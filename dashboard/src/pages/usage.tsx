import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { currentWorkspaceId } from '../session.ts';
import { bytes, ErrorBox, Link, useLoad, when } from '../ui.tsx';
import { priceText, type Pricing } from '../prices.ts';
import { BudgetSettings } from './budgets.tsx';
import { UsageOverTime } from './usage-over-time.tsx';

function dollars(cents: number): string {
  return `$${(cents / 100).toFixed(2)}`;
}

interface PricedModel {
  id: string;
  name: string;
  mode: string;
  pricing: Pricing;
  available: boolean;
  walletCentsPerCredit: number;
}

/** What each model costs on the workspace's plan, read from GET /v1/models, so it follows the catalog the service serves. */
function PriceTable({ workspaceId }: { workspaceId: string }) {
  const models = useLoad(() => api<{ plan: string; data: PricedModel[] }>('GET', '/v1/models', { query: { workspaceId } }), [workspaceId]);
  return (
    <section aria-labelledby="prices-title">
      <h2 id="prices-title">Prices on your plan</h2>
      <ErrorBox error={models.error} />
      {models.data && (
        <div class="scroll">
          <table data-testid="price-table">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Mode</th>
                <th scope="col">Credits</th>
                <th scope="col">From the wallet</th>
              </tr>
            </thead>
            <tbody>
              {models.data.data.map((model) => (
                <tr key={model.id} data-model={model.id}>
                  <td>
                    {model.name} <span class="mono small muted">{model.id}</span>
                  </td>
                  <td>{model.mode.replace(/_/g, ' ')}</td>
                  <td>{model.available ? priceText(model.pricing) : <span class="muted">not on the {models.data!.plan} plan</span>}</td>
                  <td>{model.available ? `${dollars(model.walletCentsPerCredit)} a credit` : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function UsagePage() {
  const workspaceId = currentWorkspaceId();
  const credits = useLoad(() => api('GET', `/v1/workspaces/${encodeURIComponent(workspaceId)}/credits`), [workspaceId]);
  const usage = useLoad(() => api('GET', '/v1/usage', { query: { workspaceId } }), [workspaceId]);
  const wallet = useLoad(() => api('GET', '/v1/wallet', { query: { workspaceId } }), [workspaceId]);
  const deposits = useLoad(() => api<{ data: any[] }>('GET', '/v1/wallet/deposits', { query: { workspaceId, limit: 10 } }), [workspaceId]);
  const topUps = useLoad(() => api<{ data: any[] }>('GET', '/v1/credits/top-ups', { query: { workspaceId, limit: 10 } }), [workspaceId]);
  const plans = useLoad(() => api<{ data: any[] }>('GET', '/v1/plans'), []);
  const [error, setError] = useState<unknown>();
  const [walletError, setWalletError] = useState<unknown>();

  const checkout = async (plan: string) => {
    setError(undefined);
    try {
      const started = await api('POST', '/v1/billing/checkout', { body: { workspaceId, plan } });
      location.assign(started.checkoutUrl);
    } catch (failure) {
      setError(failure);
    }
  };

  const buyCredits = async (event: Event) => {
    event.preventDefault();
    const amount = Number(new FormData(event.currentTarget as HTMLFormElement).get('credits'));
    setError(undefined);
    try {
      const order = await api('POST', '/v1/credits/top-ups', { body: { workspaceId, credits: amount } });
      if (order.checkoutUrl) location.assign(order.checkoutUrl);
      else topUps.reload();
    } catch (failure) {
      setError(failure);
    }
  };

  const depositToWallet = async (event: Event) => {
    event.preventDefault();
    const amountCents = Math.round(Number(new FormData(event.currentTarget as HTMLFormElement).get('dollars')) * 100);
    setWalletError(undefined);
    try {
      const deposit = await api('POST', '/v1/wallet/top-ups', { body: { workspaceId, amountCents } });
      if (deposit.checkoutUrl) location.assign(deposit.checkoutUrl);
      else deposits.reload();
    } catch (failure) {
      setWalletError(failure);
    }
  };

  return (
    <main>
      <h1>Usage and credits</h1>
      <div class="grid stats">
        <section class="card" aria-labelledby="credits-title">
          <h2 id="credits-title">Credits</h2>
          <ErrorBox error={credits.error} />
          {credits.data && (
            <p class="big" data-testid="available-credits">
              {credits.data.availableCredits}
            </p>
          )}
          {credits.data && (
            <p class="muted small">
              available on the {credits.data.plan} plan · {credits.data.reservedCredits} reserved for running jobs
            </p>
          )}
        </section>
        <section class="card" aria-labelledby="usage-title">
          <h2 id="usage-title">This period</h2>
          <ErrorBox error={usage.error} />
          {usage.data && (
            <dl class="facts">
              <dt>Generations</dt>
              <dd>
                {usage.data.generations.total} ({usage.data.generations.succeeded} succeeded, {usage.data.generations.failed} failed)
              </dd>
              <dt>Credits used</dt>
              <dd>{usage.data.credits}</dd>
              <dt>Wallet spend</dt>
              <dd>{dollars(usage.data.costCents)}</dd>
              <dt>Output</dt>
              <dd>{bytes(usage.data.outputBytes)}</dd>
              <dt>Since</dt>
              <dd>{when(usage.data.from)}</dd>
            </dl>
          )}
        </section>
        <section class="card" aria-labelledby="wallet-title">
          <h2 id="wallet-title">Wallet</h2>
          <ErrorBox error={wallet.error} />
          {wallet.data && (
            <p class="big" data-testid="wallet-balance">
              {dollars(wallet.data.balanceCents ?? 0)}
            </p>
          )}
        </section>
      </div>
      <UsageOverTime workspaceId={workspaceId} />
      <BudgetSettings workspaceId={workspaceId} />
      <h2>Plan</h2>
      <ErrorBox error={plans.error} />
      {plans.data && (
        <div class="grid">
          {plans.data.data.map((plan) => {
            const current = plan.id === credits.data?.plan;
            return (
              <section key={plan.id} class="card" aria-label={`${plan.name} plan`} data-plan={plan.id}>
                <h3>
                  {plan.name}
                  {current ? ' (current)' : ''}
                </h3>
                <p class="big">
                  {dollars(plan.monthlyPriceCents)}
                  <span class="muted small"> / month</span>
                </p>
                <p class="small">
                  {plan.monthlyCredits} credits a month · {plan.concurrentJobs} jobs at a time · {bytes(plan.storageBytes)} of storage ·{' '}
                  {plan.requestsPerMinute} requests a minute per key
                </p>
                {!current && plan.monthlyPriceCents > 0 && (
                  <button type="button" onClick={() => checkout(plan.id)}>
                    Upgrade to {plan.name}
                  </button>
                )}
              </section>
            );
          })}
        </div>
      )}
      <div class="grid">
        <section aria-labelledby="buy-credits-title">
          <h2 id="buy-credits-title">Buy credits</h2>
          <form onSubmit={buyCredits} class="inline">
            <label>
              Credits
              <input name="credits" type="number" min={1} step={1} required defaultValue="100" />
            </label>
            <button type="submit">Go to checkout</button>
          </form>
          <ErrorBox error={error} />
        </section>
        <section aria-labelledby="wallet-top-up-title">
          <h2 id="wallet-top-up-title">Add to the wallet</h2>
          <form onSubmit={depositToWallet} class="inline">
            <label>
              Amount (US dollars)
              <input name="dollars" type="number" min={(wallet.data?.minimumDepositCents ?? 1000) / 100} max={100000} step={0.01} required defaultValue="10" />
            </label>
            <button type="submit">Deposit at checkout</button>
          </form>
          <p class="small muted">At least {dollars(wallet.data?.minimumDepositCents ?? 1000)}; the money is in the wallet once the payment clears.</p>
          <ErrorBox error={walletError} />
        </section>
      </div>
      {topUps.data && topUps.data.data.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Top-up</th>
                <th scope="col">Credits</th>
                <th scope="col">Amount</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {topUps.data.data.map((order) => (
                <tr key={order.id}>
                  <td class="mono small">{order.id}</td>
                  <td>{order.credits}</td>
                  <td>{dollars(order.amountCents)}</td>
                  <td>{order.status}</td>
                  <td>{when(order.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {deposits.data && deposits.data.data.length > 0 && (
        <div class="scroll">
          <table data-testid="wallet-deposits">
            <thead>
              <tr>
                <th scope="col">Deposit</th>
                <th scope="col">Amount</th>
                <th scope="col">Source</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {deposits.data.data.map((deposit) => (
                <tr key={deposit.id}>
                  <td class="mono small">{deposit.id}</td>
                  <td>{dollars(deposit.amountCents)}</td>
                  <td>{deposit.source}</td>
                  <td>{deposit.status}</td>
                  <td>{when(deposit.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <PriceTable workspaceId={workspaceId} />
      <h2>Ledger</h2>
      {credits.data && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Kind</th>
                <th scope="col">Credits</th>
                <th scope="col">Reserved</th>
                <th scope="col">Wallet</th>
                <th scope="col">What it is</th>
              </tr>
            </thead>
            <tbody>
              {credits.data.ledger.map((entry: any) => (
                <tr key={entry.id}>
                  <td>{when(entry.createdAt)}</td>
                  <td>{entry.kind}</td>
                  <td>{entry.credits}</td>
                  <td>{entry.reservedCredits}</td>
                  <td>{entry.walletCents || entry.reservedWalletCents ? `${dollars(entry.walletCents)} / ${dollars(entry.reservedWalletCents)} held` : ''}</td>
                  <td class="small" data-testid="ledger-description">
                    {entry.generationId ? <Link href={`/generations/${entry.generationId}`}>{entry.description}</Link> : entry.description}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </main>
  );
}
