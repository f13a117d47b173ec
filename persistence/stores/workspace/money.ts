/**
 * The workspace actor's writes of its money: a workspace's first account, and the ledger entries of any
 * change with the balances they move, in one statement however many changes (and workspaces) a group commit
 * holds.
 */
import type { LedgerEntry } from '../../../domain/account.ts';
import { boundQuery } from '../../bound-query.ts';
import { CreditLedgerEntity } from '../../entities/workspace-account.ts';
import { newId } from '../../ids.ts';
import { noteTransactionId, TXID_COLUMN } from '../../transaction-id.ts';
import type { Transaction } from '../transaction.ts';

/**
 * One movement of a workspace's money: its ledger entries. A generation's reservation is its `reserve`
 * entry, open while the generation is unfinished (see migration 0009).
 */
export interface MoneyChange {
  workspaceId: string;
  entries: LedgerEntry[];
  at: Date;
  /** How the account's token carry moves (billionths of a credit; always within ±1 credit), with a token-priced job's capture. */
  tokenCarryNano?: number;
}

/**
 * A workspace's first account, with its opening grant: the account row if it has none, and the grant's
 * entries unless the ledger holds a grant of that reference already (so opening twice grants once).
 */
export async function writeOpeningAccount(em: Transaction, workspaceId: string, grant: { reference: string; entries: LedgerEntry[] }, at: Date): Promise<void> {
  await em.execute(
    `insert into workspace_accounts (workspace_id, available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, updated_at)
       values (?, 0, 0, 0, 0, false, ?) on conflict (workspace_id) do nothing`,
    [workspaceId, at],
    'run',
  );
  const existing = await em.count(CreditLedgerEntity, { workspaceId, kind: 'grant', reference: grant.reference });
  if (existing === 0) await writeMoney(em, workspaceId, grant.entries, at);
}

/** The balances move by deltas, so each write is right on its own, whatever commits beside it. */
export function writeMoney(em: Transaction, workspaceId: string, entries: LedgerEntry[], at: Date): Promise<void> {
  return writeMoneyChanges(em, [{ workspaceId, entries, at }]);
}

interface AccountDelta {
  workspace_id: string;
  credits: number;
  reserved_credits: number;
  wallet_cents: number;
  reserved_wallet_cents: number;
  token_carry_nano: number;
  updated_at: string;
}

/**
 * A write that rides in the same statement as the money (a data-modifying CTE, run whatever the money):
 * one INSERT, UPDATE or DELETE without RETURNING, its parameters as `?`, bound by the driver. Several may ride
 * together; they must not touch the same rows.
 */
export interface AlongsideWrite {
  sql: string;
  params: unknown[];
}

/**
 * Many changes, of one workspace or many, in one statement: each account moves by the sum of its
 * changes and every ledger entry is inserted, so a group commit of N creates or settles costs one round
 * trip for their money. The `alongside` writes are made by that same statement (so a create's rows and
 * its reservation cost one round trip together). Throws if a change names a workspace without an account.
 */
export async function writeMoneyChanges(em: Transaction, changes: MoneyChange[], alongside: AlongsideWrite[] = []): Promise<void> {
  const ctes = alongside.map((write, i) => `alongside_${i} as (${write.sql})`).join(', ');
  const alongsideParams = alongside.flatMap((write) => write.params);
  const accounts = new Map<string, AccountDelta>();
  const ledger: Array<Record<string, unknown>> = [];
  for (const change of changes) {
    if (change.entries.length === 0) continue;
    const at = change.at.toISOString();
    let delta = accounts.get(change.workspaceId);
    if (!delta) {
      delta = {
        workspace_id: change.workspaceId,
        credits: 0,
        reserved_credits: 0,
        wallet_cents: 0,
        reserved_wallet_cents: 0,
        token_carry_nano: 0,
        updated_at: at,
      };
      accounts.set(change.workspaceId, delta);
    }
    delta.token_carry_nano += change.tokenCarryNano ?? 0;
    for (const e of change.entries) {
      delta.credits += e.credits;
      delta.reserved_credits += e.reservedCredits;
      delta.wallet_cents += e.walletCents;
      delta.reserved_wallet_cents += e.reservedWalletCents;
      ledger.push({
        id: newId('txn', change.at.getTime()),
        workspace_id: change.workspaceId,
        kind: e.kind,
        credits: e.credits,
        reserved_credits: e.reservedCredits,
        wallet_cents: e.walletCents,
        reserved_wallet_cents: e.reservedWalletCents,
        generation_id: e.generationId ?? null,
        reference: e.reference ?? null,
        created_at: at,
      });
    }
    if (at > delta.updated_at) delta.updated_at = at;
  }
  if (ledger.length === 0) {
    if (alongside.length > 0) noteTransactionId(em, (await boundQuery<{ txid: string }>(em, `with ${ctes} select ${TXID_COLUMN}`, alongsideParams))[0]?.txid);
    return;
  }
  const rows = await boundQuery<{ txid: string }>(
    em,
    `with ${ctes ? `${ctes},` : ''} delta as (
       select * from jsonb_to_recordset(?::jsonb) as d(workspace_id text, credits bigint, reserved_credits bigint, wallet_cents bigint,
         reserved_wallet_cents bigint, token_carry_nano bigint, updated_at timestamptz)),
     account as (
       update workspace_accounts a set
         available_credits = a.available_credits + delta.credits, reserved_credits = a.reserved_credits + delta.reserved_credits,
         wallet_cents = a.wallet_cents + delta.wallet_cents, reserved_wallet_cents = a.reserved_wallet_cents + delta.reserved_wallet_cents,
         token_carry_nano = a.token_carry_nano + delta.token_carry_nano, updated_at = delta.updated_at
       from delta where a.workspace_id = delta.workspace_id
       returning a.workspace_id),
     entry as (
       insert into credit_ledger (id, workspace_id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference, created_at)
       select e.id, e.workspace_id, e.kind, e.credits, e.reserved_credits, e.wallet_cents, e.reserved_wallet_cents, e.generation_id, e.reference, e.created_at
       from jsonb_to_recordset(?::jsonb) as e(id text, workspace_id text, kind text, credits integer, reserved_credits integer,
         wallet_cents integer, reserved_wallet_cents integer, generation_id text, reference text, created_at timestamptz)
       where e.workspace_id in (select workspace_id from account)
       returning id)
     select ${TXID_COLUMN}, write_check((select count(*) from account) = ?::bigint and (select count(*) from entry) = ?::bigint, ?) as checked`,
    // Sorted, so transactions that commit side by side (creations have lanes) lock accounts in the same order.
    [
      ...alongsideParams,
      JSON.stringify([...accounts.values()].sort((a, b) => (a.workspace_id < b.workspace_id ? -1 : 1))),
      JSON.stringify(ledger),
      accounts.size,
      ledger.length,
      noAccount([...accounts.keys()]),
    ],
  );
  // The server checks every account was there (write_check raises otherwise): the statement fails, and its
  // transaction with it, even when COMMIT was sent along (creations).
  noteTransactionId(em, rows[0]?.txid);
}

function noAccount(names: string[]): string {
  return `no account for ${names.length === 1 ? `workspace ${names[0]}` : `some of the workspaces ${names.join(', ')}`}`;
}
