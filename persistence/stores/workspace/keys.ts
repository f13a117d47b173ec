/**
 * The statements of API keys' spending controls as the workspace actor keeps them: the keys' limits and
 * current spend read, the spend rows' changes (riding in the money's statement), and a change of limits.
 */
import { dayStart, monthStart, type BudgetPeriod, type KeyLimits, type KeySpend, type KeySpendDelta } from '../../../domain/key-limits.ts';
import { boundQuery } from '../../bound-query.ts';
import { emOf } from '../orm.ts';
import type { Transaction } from '../transaction.ts';
import type { Unit } from '../unit.ts';
import type { AlongsideWrite } from './money.ts';

/**
 * The key spend rows' changes as one write riding in the money's statement (so a key's spend commits with
 * the reservation or release it counts): deltas summed per row first, since one statement may not touch a
 * row twice, and sorted, so transactions side by side lock rows in the same order.
 */
export function keySpendWrite(deltas: KeySpendDelta[]): AlongsideWrite | undefined {
  const rows = new Map<string, { key_id: string; workspace_id: string; period: BudgetPeriod; period_start: string; credits: number; wallet_cents: number }>();
  for (const d of deltas) {
    const id = `${d.keyId}\0${d.period}\0${d.start}`;
    const row =
      rows.get(id) ??
      rows.set(id, { key_id: d.keyId, workspace_id: d.workspaceId, period: d.period, period_start: d.start, credits: 0, wallet_cents: 0 }).get(id)!;
    row.credits += d.credits;
    row.wallet_cents += d.walletCents;
  }
  const changed = [...rows.entries()]
    .filter(([, r]) => r.credits !== 0 || r.wallet_cents !== 0)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([, r]) => r);
  if (changed.length === 0) return undefined;
  return {
    sql: `insert into api_key_spend (key_id, workspace_id, period, period_start, credits, wallet_cents)
      select s.key_id, s.workspace_id, s.period, s.period_start, s.credits, s.wallet_cents
      from jsonb_to_recordset(?::jsonb) as s(key_id text, workspace_id text, period text, period_start date, credits bigint, wallet_cents bigint)
      on conflict (key_id, period, period_start) do update set
        credits = api_key_spend.credits + excluded.credits, wallet_cents = api_key_spend.wallet_cents + excluded.wallet_cents`,
    params: [JSON.stringify(changed)],
  };
}

export interface KeyRow {
  id: string;
  credit_budget: number | null;
  wallet_spend_cap_cents: number | null;
  budget_period: string;
  max_concurrent_generations: number | null;
  allowed_models: string[] | string | null;
}

export function limitsOfRow(row: KeyRow): KeyLimits {
  const models = typeof row.allowed_models === 'string' ? (JSON.parse(row.allowed_models) as string[]) : row.allowed_models;
  return {
    creditBudget: row.credit_budget === null ? null : Number(row.credit_budget),
    walletSpendCapCents: row.wallet_spend_cap_cents === null ? null : Number(row.wallet_spend_cap_cents),
    period: row.budget_period === 'day' ? 'day' : 'month',
    maxConcurrentGenerations: row.max_concurrent_generations === null ? null : Number(row.max_concurrent_generations),
    allowedModels: models ?? null,
  };
}

/**
 * The limits and current day's and month's spend of keys, in two statements, whatever their number: each
 * key of `owners` (key id → the workspace it must belong to) found in that workspace. A key of another
 * workspace, or none, is not found (its creates go on without key limits: the caller has authenticated it
 * for this workspace, so that happens only to a key deleted meanwhile).
 */
export async function readKeySpends(unit: Unit, owners: Map<string, string>, now: number): Promise<Map<string, KeySpend>> {
  const found = new Map<string, KeySpend>();
  if (owners.size === 0) return found;
  const em = emOf(unit);
  const keys = await boundQuery<KeyRow & { workspace_id: string }>(
    em,
    `select id, workspace_id, credit_budget, wallet_spend_cap_cents, budget_period, max_concurrent_generations, allowed_models
       from api_keys where id in (select jsonb_array_elements_text(?::jsonb))`,
    [JSON.stringify([...owners.keys()])],
  );
  const day = dayStart(now);
  const month = monthStart(now);
  for (const row of keys) {
    if (owners.get(row.id) !== row.workspace_id) continue;
    found.set(row.id, {
      limits: limitsOfRow(row),
      day: { start: day, credits: 0, walletCents: 0 },
      month: { start: month, credits: 0, walletCents: 0 },
      unfinished: 0,
    });
  }
  if (found.size === 0) return found;
  const spends = await boundQuery<{ key_id: string; period: string; credits: number | string; wallet_cents: number | string }>(
    em,
    `select key_id, period, credits, wallet_cents from api_key_spend
      where key_id in (select jsonb_array_elements_text(?::jsonb))
        and ((period = 'day' and period_start = ?::date) or (period = 'month' and period_start = ?::date))`,
    [JSON.stringify([...found.keys()]), day, month],
  );
  for (const s of spends) {
    const key = found.get(s.key_id);
    if (!key) continue;
    const period = s.period === 'day' ? 'day' : 'month';
    key[period] = { start: period === 'day' ? day : month, credits: Number(s.credits), walletCents: Number(s.wallet_cents) };
  }
  return found;
}

/** The limits and current spend of a workspace's keys among `keyIds` (readKeySpends). */
export function readWorkspaceKeySpends(unit: Unit, workspaceId: string, keyIds: string[], now: number): Promise<Map<string, KeySpend>> {
  return readKeySpends(unit, new Map(keyIds.map((id) => [id, workspaceId])), now);
}

/** A key's spending controls as they now are, written to its row (if it is the workspace's). */
export async function writeKeyLimits(em: Transaction, workspaceId: string, keyId: string, limits: KeyLimits, at: Date): Promise<void> {
  await em.execute(
    `update api_keys set credit_budget = ?, wallet_spend_cap_cents = ?, budget_period = ?, max_concurrent_generations = ?, allowed_models = ?::jsonb, updated_at = ?
        where id = ? and workspace_id = ?`,
    [
      limits.creditBudget,
      limits.walletSpendCapCents,
      limits.period,
      limits.maxConcurrentGenerations,
      limits.allowedModels === null ? null : JSON.stringify(limits.allowedModels),
      at,
      keyId,
      workspaceId,
    ],
    'run',
  );
}
