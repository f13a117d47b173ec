import { Migration } from '@mikro-orm/migrations';

/**
 * Money beyond generations: payments through a payment provider, the orders they pay (credit top-ups,
 * wallet deposits, subscriptions), provider events applied once (by event id), and the wallet's settings
 * beside its balance. Balances still move only through credit_ledger, whose unique reference index makes
 * each paid order and each subscription period grant count once.
 */
export class Migration0008Money extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table workspace_accounts
        add column auto_recharge_enabled boolean not null default false,
        add column auto_recharge_threshold_cents integer not null default 0 check (auto_recharge_threshold_cents >= 0),
        add column auto_recharge_amount_cents integer not null default 0 check (auto_recharge_amount_cents >= 0),
        add column monthly_spend_cap_cents integer check (monthly_spend_cap_cents >= 0)`);

    this.addSql(`
      create table payments (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        provider text not null,
        purpose text not null check (purpose in ('subscription', 'credit_top_up', 'wallet_deposit')),
        order_id text not null,
        plan text,
        amount_cents integer not null check (amount_cents >= 0),
        status text not null check (status in ('pending', 'succeeded', 'failed')),
        description text not null,
        failure_reason text,
        created_at timestamptz not null,
        completed_at timestamptz
      )`);
    this.addSql('create index payments_ws_idx on payments (workspace_id, created_at desc, id desc)');
    this.addSql('create index payments_order_idx on payments (order_id)');

    this.addSql(`
      create table credit_top_ups (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        credits integer not null check (credits > 0),
        amount_cents integer not null check (amount_cents > 0),
        status text not null check (status in ('pending', 'paid', 'failed')),
        payment_id text not null,
        created_at timestamptz not null,
        completed_at timestamptz
      )`);
    this.addSql('create index credit_top_ups_ws_idx on credit_top_ups (workspace_id, created_at desc, id desc)');

    this.addSql(`
      create table wallet_deposits (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        amount_cents integer not null check (amount_cents > 0),
        source text not null check (source in ('checkout', 'auto_recharge')),
        status text not null check (status in ('pending', 'paid', 'failed')),
        payment_id text not null,
        created_at timestamptz not null,
        completed_at timestamptz
      )`);
    this.addSql('create index wallet_deposits_ws_idx on wallet_deposits (workspace_id, created_at desc, id desc)');

    this.addSql(`
      create table subscriptions (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        plan text not null,
        status text not null check (status in ('active', 'canceled', 'replaced', 'past_due')),
        current_period_start timestamptz not null,
        current_period_end timestamptz not null,
        cancel_at_period_end boolean not null default false,
        ended_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      )`);
    // At most one live subscription per workspace.
    this.addSql(`create unique index subscriptions_one_active on subscriptions (workspace_id) where status = 'active'`);
    this.addSql('create index subscriptions_ws_idx on subscriptions (workspace_id, created_at desc, id desc)');

    this.addSql(`
      create table billing_events (
        id text primary key,
        provider text not null,
        type text not null,
        payment_id text,
        workspace_id text,
        applied boolean not null,
        received_at timestamptz not null
      )`);
  }

  override async down(): Promise<void> {
    for (const table of ['billing_events', 'subscriptions', 'wallet_deposits', 'credit_top_ups', 'payments']) this.addSql(`drop table if exists ${table}`);
    this.addSql(`alter table workspace_accounts drop column auto_recharge_enabled, drop column auto_recharge_threshold_cents,
      drop column auto_recharge_amount_cents, drop column monthly_spend_cap_cents`);
  }
}
