import { Migration } from '@mikro-orm/migrations';

/**
 * Start-up reads only what is unfinished, through indexes that hold nothing else, so its cost follows the
 * work still to do, not the history:
 *
 * - `generations_unfinished_ws_idx`: the workspaces with unfinished jobs, and each one's jobs in flight, for
 *   recovery (actors/generation-recovery.ts) and for the emergency stop's release (resume.ts). The older
 *   `generations_active_idx` is ordered by creation time only, so finding a workspace's jobs in it, or the
 *   distinct workspaces, meant reading every unfinished row of every workspace.
 * - `credit_ledger_wallet_spend_idx`: a workspace's wallet spending of the month, read when its actor loads
 *   (the monthly spend cap). Only the entries that moved wallet money are in it; the month's credit
 *   reservations, releases and captures (thousands in a busy workspace) are not read at all.
 */
export class Migration0013UnfinishedIndexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create index generations_unfinished_ws_idx on generations (workspace_id, status) where status in ('queued', 'reserved', 'submitted', 'running')`,
    );
    this.addSql(
      `create index credit_ledger_wallet_spend_idx on credit_ledger (workspace_id, created_at) where kind in ('reserve', 'release') and wallet_cents <> 0`,
    );
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists credit_ledger_wallet_spend_idx');
    this.addSql('drop index if exists generations_unfinished_ws_idx');
  }
}
