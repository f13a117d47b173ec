import { Migration } from '@mikro-orm/migrations';

/**
 * Usage over time (GET /v1/usage/series): per workspace, UTC hour and UTC day of the generations' creation,
 * API key, model, mode and project, the figures of GET /v1/usage plus the tokens their providers reported.
 * Two grains in one table, so a year by day reads a few hundred rows per group and a day by hour a few dozen,
 * whatever the history (persistence/usage-series.ts). `api_key_id` and `project` are '' when the
 * generation has none.
 *
 * The rows change in the same statements as usage_rollups (creations, settlements, output assets); the
 * backfill below sums the rows already there.
 */
export class Migration0022UsageSeries extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table usage_series (
        workspace_id text not null references workspaces (id) on delete cascade,
        grain text not null check (grain in ('hour', 'day')),
        bucket timestamptz not null,
        api_key_id text not null,
        model_id text not null,
        mode text not null,
        project text not null,
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
        tokens_in bigint not null default 0,
        tokens_out bigint not null default 0,
        primary key (workspace_id, grain, bucket, api_key_id, model_id, mode, project)
      )`);
    for (const grain of ['hour', 'day']) {
      this.addSql(`
        insert into usage_series (workspace_id, grain, bucket, api_key_id, model_id, mode, project, total, succeeded, failed, cancelled,
          expired, unfinished, credits, credits_from_balance, cost_cents, output_bytes, tokens_in, tokens_out)
        select g.workspace_id, '${grain}', date_trunc('${grain}', g.created_at at time zone 'UTC') at time zone 'UTC',
               coalesce(g.api_key_id, ''), g.model_id, g.mode, coalesce(g.project, ''),
               count(*), count(*) filter (where g.status = 'succeeded'), count(*) filter (where g.status = 'failed'),
               count(*) filter (where g.status = 'cancelled'), count(*) filter (where g.status = 'expired'),
               count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')),
               coalesce(sum(g.credits) filter (where l.generation_id is not null), 0),
               coalesce(sum(-l.reserved_credits), 0), coalesce(sum(-l.reserved_wallet_cents), 0), coalesce(sum(a.bytes), 0),
               coalesce(sum((g.usage ->> 'inputTokens')::bigint), 0), coalesce(sum((g.usage ->> 'outputTokens')::bigint), 0)
          from generations g
          left join credit_ledger l on l.workspace_id = g.workspace_id and l.kind = 'capture' and l.generation_id = g.id
          left join (select workspace_id, source_generation_id, sum(bytes) as bytes from assets
                      where source_generation_id is not null group by 1, 2) a
            on a.workspace_id = g.workspace_id and a.source_generation_id = g.id
         group by 1, 2, 3, 4, 5, 6, 7`);
    }
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists usage_series');
  }
}
