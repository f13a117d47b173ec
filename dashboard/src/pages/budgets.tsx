import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorBox, useLoad, when } from '../ui.tsx';

/** Budget alerts (GET and PATCH /v1/budgets): the banner of this period's crossed thresholds, and the thresholds' form. */

interface Alert {
  kind: string;
  threshold: number;
  current: boolean;
  crossedAt: string;
  message: string;
  eventId: string;
}
interface Budgets {
  creditsUsedPercents: number[];
  walletBelowCents: number[];
  keySpendPercents: number[];
  status: { usedPercent: number | null; availableCredits: number; grantCredits: number };
  alerts: Alert[];
}

const list = (value: FormDataEntryValue | null, scale = 1): number[] =>
  String(value ?? '')
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((part) => Math.round(Number(part) * scale));

export function BudgetBanner({ workspaceId }: { workspaceId: string }) {
  const budgets = useLoad(() => api<Budgets>('GET', '/v1/budgets', { query: { workspaceId } }), [workspaceId]);
  const current = budgets.data?.alerts.filter((a) => a.current) ?? [];
  if (current.length === 0) return null;
  return (
    <div class="banner warning" role="alert" data-testid="budget-banner">
      <strong>Budget alert{current.length === 1 ? '' : 's'}:</strong>
      <ul>
        {current.map((alert) => (
          <li key={alert.eventId}>
            {alert.message} <span class="muted small">({when(alert.crossedAt)})</span>
          </li>
        ))}
      </ul>
    </div>
  );
}

export function BudgetSettings({ workspaceId }: { workspaceId: string }) {
  const budgets = useLoad(() => api<Budgets>('GET', '/v1/budgets', { query: { workspaceId } }), [workspaceId]);
  const [error, setError] = useState<unknown>();
  const [saved, setSaved] = useState(false);
  const save = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    setError(undefined);
    setSaved(false);
    try {
      await api('PATCH', '/v1/budgets', {
        body: {
          workspaceId,
          creditsUsedPercents: list(form.get('credits')),
          walletBelowCents: list(form.get('wallet'), 100),
          keySpendPercents: list(form.get('keys')),
        },
      });
      setSaved(true);
      budgets.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const data = budgets.data;
  return (
    <section aria-labelledby="budgets-title">
      <h2 id="budgets-title">Budget alerts</h2>
      <p class="small muted">
        Each threshold warns once per period, by a <span class="mono">budget.threshold_crossed</span> webhook event and a banner here.
        {data && data.status.usedPercent !== null && ` This period: ${data.status.usedPercent} % of ${data.status.grantCredits} credits used.`}
      </p>
      <ErrorBox error={budgets.error} />
      {data && (
        <form onSubmit={save} class="inline" key={JSON.stringify([data.creditsUsedPercents, data.walletBelowCents, data.keySpendPercents])}>
          <label>
            Credits used (% of the period's grant)
            <input name="credits" defaultValue={data.creditsUsedPercents.join(', ')} placeholder="50, 80, 100" />
          </label>
          <label>
            Wallet below (US dollars)
            <input name="wallet" defaultValue={data.walletBelowCents.map((c) => (c / 100).toString()).join(', ')} placeholder="10, 5" />
          </label>
          <label>
            API key spend (% of its caps)
            <input name="keys" defaultValue={data.keySpendPercents.join(', ')} placeholder="80, 100" />
          </label>
          <button type="submit">Save thresholds</button>
          {saved && <span class="muted small">Saved.</span>}
        </form>
      )}
      <ErrorBox error={error} />
    </section>
  );
}
