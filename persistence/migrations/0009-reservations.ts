import { Migration } from '@mikro-orm/migrations';

/**
 * A generation's reservation is no longer copied into its workspace's account row. The ledger already
 * holds it (the generation's `reserve` entry) and the generation's status says whether it is still open
 * (a terminal status commits with its capture or release), so the workspace actor rebuilds its open
 * reservations from those at load. The copy was a JSON object of every unfinished job, rewritten whole on
 * every create and settle: with hundreds of jobs queued it was most of what a create cost the database.
 */
export class Migration0009Reservations extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table workspace_accounts drop column reservations');
  }

  override async down(): Promise<void> {
    this.addSql(`alter table workspace_accounts add column reservations jsonb not null default '{}'`);
    this.addSql(`
      update workspace_accounts a set reservations = open.reservations
      from (
        select g.workspace_id, jsonb_object_agg(g.id, jsonb_build_object('credits', l.reserved_credits, 'walletCents', l.reserved_wallet_cents)) as reservations
        from generations g join credit_ledger l on l.workspace_id = g.workspace_id and l.kind = 'reserve' and l.generation_id = g.id
        where g.status in ('queued', 'reserved', 'submitted', 'running')
        group by g.workspace_id
      ) as open
      where a.workspace_id = open.workspace_id`);
  }
}
