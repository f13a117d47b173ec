/**
 * The reads of a workspace's money that the API answers: its credit balances, its ledger, and pages of its
 * ledger entries, wallet deposits, credit top-ups and payments. The writes are the workspace actor's.
 */
import { emOf } from './orm.ts';
import type { Unit } from './unit.ts';

/** A row as the database answers it, columns by their SQL names. */
export type MoneyRow = Record<string, unknown> & { id: string };

/** The tables of a workspace's money listed page by page, newest first. */
export type MoneyTable = 'credit_ledger' | 'wallet_deposits' | 'credit_top_ups' | 'payments';

/** What a page is filtered by, beside its workspace. */
export interface MoneyFilter {
  /** credit_ledger: only the entries that move wallet cents. */
  walletOnly?: boolean;
  /** credit_top_ups: only those of this status. */
  status?: string;
}

/**
 * A page of a workspace's rows of `table`, newest first by (created_at, id), after the `(created_at, id)`
 * of the page before, each with its created_at to the microsecond (`cursor_at`): an index range scan on
 * (workspace_id, created_at desc, id desc).
 */
export function moneyPage(
  unit: Unit,
  table: MoneyTable,
  workspaceId: string,
  filter: MoneyFilter,
  page: { after?: [at: string, id: string]; limit: number },
): Promise<Array<MoneyRow & { cursor_at: string }>> {
  const conditions = ['workspace_id = ?'];
  const params: unknown[] = [workspaceId];
  if (filter.walletOnly) conditions.push('(wallet_cents <> 0 or reserved_wallet_cents <> 0)');
  if (filter.status !== undefined) {
    conditions.push('status = ?');
    params.push(filter.status);
  }
  if (page.after) {
    conditions.push('(created_at, id) < (?::timestamptz, ?)');
    params.push(...page.after);
  }
  params.push(page.limit);
  return emOf(unit).execute<Array<MoneyRow & { cursor_at: string }>>(
    `select *, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at from ${table}
      where ${conditions.join(' and ')} order by created_at desc, id desc limit ?`,
    params,
  );
}

/** A workspace's credits available and reserved (its account exists once its actor opened it). */
export async function creditBalances(unit: Unit, workspaceId: string): Promise<{ available_credits: number; reserved_credits: number } | undefined> {
  const [account] = await emOf(unit).execute<Array<{ available_credits: number; reserved_credits: number }>>(
    'select available_credits, reserved_credits from workspace_accounts where workspace_id = ?',
    [workspaceId],
  );
  return account;
}

/** A workspace's 20 latest ledger entries, newest first. */
export function latestLedger(unit: Unit, workspaceId: string): Promise<MoneyRow[]> {
  return emOf(unit).execute<MoneyRow[]>('select * from credit_ledger where workspace_id = ? order by created_at desc, id desc limit 20', [workspaceId]);
}
