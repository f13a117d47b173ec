import { Migration } from '@mikro-orm/migrations';

/**
 * Per-key spending controls: the limits an API key carries (null: none), and what each key's generations
 * took in each UTC day and month.
 *
 * - `api_keys`: `credit_budget` (credits per period), `wallet_spend_cap_cents` (wallet cents per the same
 *   period), `budget_period` (`day` or `month`), `max_concurrent_generations` (unfinished at a time) and
 *   `allowed_models` (a JSON array of model ids, null for every model).
 * - `api_key_spend`: one row per key, period kind and period start. The workspace actor, the single writer
 *   of its workspace, moves it by deltas in the same statement as the reservation (a create) or the
 *   release (a failed, cancelled or expired job), so it always equals the key's open and captured
 *   reservations of that period. Both kinds are kept for every key, so a budget set or a period changed
 *   mid-period starts from what the key really spent. Filled here from the current month's jobs made before.
 */
export class Migration0014KeyLimits extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table api_keys
      add column credit_budget integer,
      add column wallet_spend_cap_cents integer,
      add column budget_period text not null default 'month' check (budget_period in ('day', 'month')),
      add column max_concurrent_generations integer,
      add column allowed_models jsonb`);
    this.addSql(`create table api_key_spend (
      key_id text not null references api_keys (id) on delete cascade,
      period text not null check (period in ('day', 'month')),
      period_start date not null,
      workspace_id text not null,
      credits bigint not null default 0,
      wallet_cents bigint not null default 0,
      primary key (key_id, period, period_start)
    )`);
    // The keys' jobs of the current UTC month made before this migration, so their figures start right and a
    // later release of one of them gives back what was counted. Earlier months are never read again.
    this.addSql(`insert into api_key_spend (key_id, workspace_id, period, period_start, credits, wallet_cents)
      select g.api_key_id, min(g.workspace_id), p.period, p.period_start, sum(g.credits), sum(l.reserved_wallet_cents)
      from generations g
      join api_keys k on k.id = g.api_key_id
      join credit_ledger l on l.workspace_id = g.workspace_id and l.kind = 'reserve' and l.generation_id = g.id
      cross join lateral (values
        ('day', (g.created_at at time zone 'UTC')::date),
        ('month', date_trunc('month', g.created_at at time zone 'UTC')::date)) as p(period, period_start)
      where g.created_at >= date_trunc('month', now() at time zone 'UTC') at time zone 'UTC'
        and g.status not in ('failed', 'cancelled', 'expired')
      group by g.api_key_id, p.period, p.period_start`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists api_key_spend');
    this.addSql(`alter table api_keys drop column if exists credit_budget, drop column if exists wallet_spend_cap_cents,
      drop column if exists budget_period, drop column if exists max_concurrent_generations, drop column if exists allowed_models`);
  }
}
