import { Migration } from '@mikro-orm/migrations';

/**
 * Budgets that warn (docs/money.md, Budget alerts): a workspace's thresholds (`budget_settings`) on the
 * credits used of its period's grant, on its wallet balance and on each API key's spend caps; and one row
 * per threshold crossed per period (`budget_crossings`). The crossing's primary key is what makes its
 * event happen once: every node that sees the crossing inserts the row if absent, in the transaction that
 * writes the event, and only the insert that made the row writes it.
 */
export class Migration0023BudgetAlerts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table budget_settings (
        workspace_id text primary key references workspaces (id) on delete cascade,
        credits_used_percents jsonb not null default '[]',
        wallet_below_cents jsonb not null default '[]',
        key_spend_percents jsonb not null default '[]',
        updated_at timestamptz not null
      )`);
    this.addSql(`
      create table budget_crossings (
        workspace_id text not null references workspaces (id) on delete cascade,
        kind text not null check (kind in ('credits_used', 'wallet_balance', 'key_credit_budget', 'key_wallet_cap')),
        subject text not null,
        threshold integer not null,
        period text not null,
        event_id text not null,
        crossed_at timestamptz not null,
        details jsonb not null,
        primary key (workspace_id, kind, subject, threshold, period)
      )`);
    this.addSql('create index budget_crossings_ws_time_idx on budget_crossings (workspace_id, crossed_at desc)');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists budget_crossings');
    this.addSql('drop table if exists budget_settings');
  }
}
