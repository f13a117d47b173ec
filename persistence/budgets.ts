/**
 * The statements of budget alerts (migration 0023): a workspace's thresholds, the figures the rules read
 * (domain/budgets.ts), and the crossings, each inserted only if absent.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { emOf } from './stores/orm.ts';
import type { Unit } from './stores/unit.ts';
import type { BudgetFigures, BudgetKind, BudgetSettings, Crossing, KeyFigures } from '../domain/budgets.ts';
import { noBudgetSettings } from '../domain/budgets.ts';
import { boundQuery } from './bound-query.ts';

const numbers = (value: unknown): number[] => {
  const list = typeof value === 'string' ? JSON.parse(value) : value;
  return Array.isArray(list) ? list.map(Number) : [];
};

export interface StoredBudgetSettings extends BudgetSettings {
  updatedAt: Date | null;
}

export async function readBudgetSettings(unit: Unit, workspaceId: string): Promise<StoredBudgetSettings> {
  const em = emOf(unit);
  const [row] = await boundQuery<Record<string, unknown>>(
    em,
    'select credits_used_percents, wallet_below_cents, key_spend_percents, updated_at from budget_settings where workspace_id = ?',
    [workspaceId],
  );
  if (!row) return { ...noBudgetSettings(), updatedAt: null };
  return {
    creditsUsedPercents: numbers(row.credits_used_percents),
    walletBelowCents: numbers(row.wallet_below_cents),
    keySpendPercents: numbers(row.key_spend_percents),
    updatedAt: new Date(row.updated_at as string),
  };
}

export async function writeBudgetSettings(unit: Unit, workspaceId: string, s: BudgetSettings, at: Date): Promise<void> {
  const em = emOf(unit);
  await boundQuery(
    em,
    `insert into budget_settings (workspace_id, credits_used_percents, wallet_below_cents, key_spend_percents, updated_at)
     values (?, ?::jsonb, ?::jsonb, ?::jsonb, ?)
     on conflict (workspace_id) do update set credits_used_percents = excluded.credits_used_percents,
       wallet_below_cents = excluded.wallet_below_cents, key_spend_percents = excluded.key_spend_percents, updated_at = excluded.updated_at`,
    [workspaceId, JSON.stringify(s.creditsUsedPercents), JSON.stringify(s.walletBelowCents), JSON.stringify(s.keySpendPercents), at],
  );
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * What the rules read of a workspace now, from committed rows: its account, plan, live subscription, last
 * paid deposit, and the spend of its live keys that have a cap, in their current period. `grantOf` gives a
 * plan's credits per period (from the catalog). Undefined when there is no such workspace.
 */
export async function readBudgetFigures(unit: Unit, workspaceId: string, now: number, grantOf: (plan: string) => number): Promise<BudgetFigures | undefined> {
  const em = emOf(unit);
  const [account] = await boundQuery<Record<string, unknown>>(
    em,
    `select w.plan, a.available_credits, a.wallet_cents, a.wallet_activated,
            (select s.id || ':' || to_char(s.current_period_start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') from subscriptions s
              where s.workspace_id = w.id and s.status = 'active') as subscription_period,
            (select d.id from wallet_deposits d where d.workspace_id = w.id and d.status = 'paid' order by d.completed_at desc, d.id desc limit 1) as last_deposit
       from workspaces w left join workspace_accounts a on a.workspace_id = w.id
      where w.id = ?`,
    [workspaceId],
  );
  if (!account) return undefined;
  const dayStart = day(now);
  const monthStart = `${dayStart.slice(0, 7)}-01`;
  const keyRows = await boundQuery<Record<string, unknown>>(
    em,
    `select k.id, k.name, k.budget_period, k.credit_budget, k.wallet_spend_cap_cents, s.credits, s.wallet_cents
       from api_keys k
       left join api_key_spend s on s.key_id = k.id and s.period = k.budget_period
         and s.period_start = case when k.budget_period = 'day' then ?::date else ?::date end
      where k.workspace_id = ? and k.revoked_at is null and (k.credit_budget is not null or k.wallet_spend_cap_cents is not null)
      order by k.id`,
    [dayStart, monthStart, workspaceId],
  );
  const keys: KeyFigures[] = keyRows.map((k) => ({
    keyId: String(k.id),
    name: String(k.name ?? ''),
    period: k.budget_period === 'day' ? `day:${dayStart}` : `month:${monthStart}`,
    creditBudget: k.credit_budget === null ? null : Number(k.credit_budget),
    walletSpendCapCents: k.wallet_spend_cap_cents === null ? null : Number(k.wallet_spend_cap_cents),
    credits: Number(k.credits ?? 0),
    walletCents: Number(k.wallet_cents ?? 0),
  }));
  // A workspace whose account is not open yet (no job so far) has its plan's opening grant.
  const grant = grantOf(String(account.plan));
  return {
    grantCredits: grant,
    availableCredits: account.available_credits == null ? grant : Number(account.available_credits),
    creditPeriod: account.subscription_period ? `sub:${account.subscription_period}` : `month:${monthStart.slice(0, 7)}`,
    wallet: {
      activated: account.wallet_activated === true || account.wallet_activated === 't',
      balanceCents: Number(account.wallet_cents ?? 0),
      period: account.last_deposit ? `deposit:${account.last_deposit}` : 'deposit:none',
    },
    keys,
  };
}

export interface ClaimedCrossing extends Crossing {
  eventId: string;
  crossedAt: Date;
}

/**
 * Inserts the crossings whose row does not exist yet, and answers those it inserted: of any number of
 * nodes or checks that see one crossing at once, exactly one gets it back (the primary key decides; a
 * concurrent insert of the same key waits for the first one's transaction and then does nothing).
 */
export async function claimCrossings(
  em: SqlEntityManager,
  workspaceId: string,
  crossings: Array<Crossing & { eventId: string }>,
  at: Date,
): Promise<ClaimedCrossing[]> {
  if (crossings.length === 0) return [];
  const rows = await boundQuery<{ kind: BudgetKind; subject: string; threshold: number; period: string; event_id: string }>(
    em,
    `insert into budget_crossings (workspace_id, kind, subject, threshold, period, event_id, crossed_at, details)
     select ?, c.kind, c.subject, c.threshold, c.period, c.event_id, ?, c.details
       from jsonb_to_recordset(?::jsonb) as c(kind text, subject text, threshold integer, period text, event_id text, details jsonb)
      order by c.kind, c.subject, c.threshold, c.period
     on conflict (workspace_id, kind, subject, threshold, period) do nothing
     returning kind, subject, threshold, period, event_id`,
    [
      workspaceId,
      at,
      JSON.stringify(
        crossings.map((c) => ({ kind: c.kind, subject: c.subject, threshold: c.threshold, period: c.period, event_id: c.eventId, details: c.details })),
      ),
    ],
  );
  const byEvent = new Map(crossings.map((c) => [c.eventId, c]));
  return rows.map((r) => ({ ...byEvent.get(r.event_id)!, crossedAt: at }));
}

export interface StoredCrossing extends ClaimedCrossing {}

/** The workspace's crossings, newest first (at most `limit`). */
export async function listCrossings(unit: Unit, workspaceId: string, limit: number): Promise<StoredCrossing[]> {
  const em = emOf(unit);
  const rows = await boundQuery<Record<string, unknown>>(
    em,
    `select kind, subject, threshold, period, event_id, crossed_at, details from budget_crossings
      where workspace_id = ? order by crossed_at desc, kind, subject, threshold limit ?`,
    [workspaceId, limit],
  );
  return rows.map((r) => ({
    kind: r.kind as BudgetKind,
    subject: String(r.subject),
    threshold: Number(r.threshold),
    period: String(r.period),
    eventId: String(r.event_id),
    crossedAt: new Date(r.crossed_at as string),
    details: (typeof r.details === 'string' ? JSON.parse(r.details) : r.details) as Record<string, unknown>,
  }));
}
