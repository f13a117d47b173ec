import { Migration } from '@mikro-orm/migrations';

/**
 * Usage by workspace, API key and UTC day of the generations' creation, kept beside the rows it sums so
 * GET /v1/usage and the per-key usage read a few rows per day instead of the whole history
 * (persistence/usage-rollups.ts). Each column has the meaning of the query it replaces: generations by
 * status, the generation's credits and the credits and wallet cents of its `capture` ledger entry, the
 * bytes of the assets whose source is the generation. `api_key_id` is '' for generations made without a key.
 *
 * The rows are changed in the transactions that create generations, settle them, and add or remove their
 * output assets; the backfill below sums the rows already there.
 */
export class Migration0012UsageRollups extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table usage_rollups (
        workspace_id text not null references workspaces (id) on delete cascade,
        day date not null,
        api_key_id text not null,
        total bigint not null default 0,
        succeeded bigint not null default 0,
        failed bigint not null default 0,
        cancelled bigint not null default 0,
        expired bigint not null default 0,
        unfinished bigint not null default 0,
        credits bigint not null default 0,
        credits_from_balance bigint not null default 0,
        cost_cents bigint not null default 0,
        output_bytes bigint not null default 0,
        primary key (workspace_id, day, api_key_id)
      )`);
    this.addSql(`
      insert into usage_rollups (workspace_id, day, api_key_id, total, succeeded, failed, cancelled, expired, unfinished,
        credits, credits_from_balance, cost_cents, output_bytes)
      select g.workspace_id, (g.created_at at time zone 'UTC')::date, coalesce(g.api_key_id, ''),
             count(*), count(*) filter (where g.status = 'succeeded'), count(*) filter (where g.status = 'failed'),
             count(*) filter (where g.status = 'cancelled'), count(*) filter (where g.status = 'expired'),
             count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')),
             coalesce(sum(g.credits) filter (where l.generation_id is not null), 0),
             coalesce(sum(-l.reserved_credits), 0), coalesce(sum(-l.reserved_wallet_cents), 0), coalesce(sum(a.bytes), 0)
        from generations g
        left join credit_ledger l on l.workspace_id = g.workspace_id and l.kind = 'capture' and l.generation_id = g.id
        left join (select workspace_id, source_generation_id, sum(bytes) as bytes from assets
                    where source_generation_id is not null group by 1, 2) a
          on a.workspace_id = g.workspace_id and a.source_generation_id = g.id
       group by 1, 2, 3`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists usage_rollups');
  }
}
