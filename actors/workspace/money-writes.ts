import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../persistence/ids.ts';
import type { LedgerEntry } from './account.ts';

/** The balances move by deltas, so each write is right on its own, whatever commits beside it. */
export async function writeMoney(
  em: SqlEntityManager,
  workspaceId: string,
  entries: LedgerEntry[],
  at: Date,
  reservations: { add?: Record<string, { credits: number; walletCents: number }>; remove?: string },
): Promise<void> {
  if (entries.length === 0) return;
  const sum = entries.reduce((t, e) => ({
    credits: t.credits + e.credits, reservedCredits: t.reservedCredits + e.reservedCredits,
    walletCents: t.walletCents + e.walletCents, reservedWalletCents: t.reservedWalletCents + e.reservedWalletCents,
  }), { credits: 0, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0 });
  const ledger = entries.map((e) => ({
    id: newId('txn', at.getTime()), kind: e.kind, credits: e.credits, reserved_credits: e.reservedCredits, wallet_cents: e.walletCents,
    reserved_wallet_cents: e.reservedWalletCents, generation_id: e.generationId ?? null, reference: e.reference ?? null,
  }));
  // One round trip: the balances move and the entries that explain them are inserted by the same statement.
  const inserted = await em.execute<Array<{ id: string }>>(
    `with account as (
       update workspace_accounts set
         available_credits = available_credits + ?, reserved_credits = reserved_credits + ?,
         wallet_cents = wallet_cents + ?, reserved_wallet_cents = reserved_wallet_cents + ?,
         reservations = (reservations - ?::text) || ?::jsonb, updated_at = ?
       where workspace_id = ? returning workspace_id)
     insert into credit_ledger (id, workspace_id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference, created_at)
     select e.id, account.workspace_id, e.kind, e.credits, e.reserved_credits, e.wallet_cents, e.reserved_wallet_cents, e.generation_id, e.reference, ?
     from account cross join jsonb_to_recordset(?::jsonb) as e(id text, kind text, credits integer, reserved_credits integer,
       wallet_cents integer, reserved_wallet_cents integer, generation_id text, reference text)
     returning id`,
    [sum.credits, sum.reservedCredits, sum.walletCents, sum.reservedWalletCents, reservations.remove ?? '', JSON.stringify(reservations.add ?? {}), at, workspaceId,
      at, JSON.stringify(ledger)],
  );
  if (inserted.length !== entries.length) throw new Error(`workspace ${workspaceId} has no account`);
}
