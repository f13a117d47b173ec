/**
 * What explains a generation's cost (GET /v1/generations/:id, price): its ledger entries and the charge
 * its settlement kept (migration 0024), read by the generation's workspace and id (index
 * credit_ledger_generation_once).
 */
import { boundQuery } from '../../bound-query.ts';
import { emOf } from '../orm.ts';
import type { Unit } from '../unit.ts';

export interface StoredCharge {
  exactNano: string;
  carryBeforeNano: string;
  carryAfterNano: string;
  capped: boolean;
}

export interface GenerationLedgerRow {
  id: string;
  kind: string;
  credits: number;
  reservedCredits: number;
  walletCents: number;
  reservedWalletCents: number;
  reference: string | null;
  createdAt: Date;
}

export async function readGenerationCharge(
  unit: Unit,
  workspaceId: string,
  generationId: string,
): Promise<{ charge: StoredCharge | null; ledger: GenerationLedgerRow[] }> {
  const em = emOf(unit);
  const [charged, ledger] = await Promise.all([
    boundQuery<{ charge: unknown }>(em, 'select charge from generations where id = ? and workspace_id = ?', [generationId, workspaceId]),
    boundQuery<Record<string, unknown>>(
      em,
      `select id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, reference, created_at from credit_ledger
        where workspace_id = ? and generation_id = ? and kind in ('reserve', 'capture', 'release') order by created_at, id`,
      [workspaceId, generationId],
    ),
  ]);
  const raw = charged[0]?.charge;
  const charge = (typeof raw === 'string' ? JSON.parse(raw) : (raw ?? null)) as StoredCharge | null;
  return {
    charge,
    ledger: ledger.map((r) => ({
      id: String(r.id),
      kind: String(r.kind),
      credits: Number(r.credits),
      reservedCredits: Number(r.reserved_credits),
      walletCents: Number(r.wallet_cents),
      reservedWalletCents: Number(r.reserved_wallet_cents),
      reference: (r.reference as string | null) ?? null,
      createdAt: new Date(r.created_at as string),
    })),
  };
}
