import { Migration } from '@mikro-orm/migrations';

/** Generations, the workspace money accounts and their ledger, idempotency keys, service switches. */
export class Migration0005Generations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table generations (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        api_key_id text,
        user_id text,
        mode text not null,
        model_id text not null,
        status text not null check (status in ('queued', 'reserved', 'submitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired')),
        params jsonb not null,
        inputs jsonb not null,
        payment_mode text not null check (payment_mode in ('credits', 'wallet', 'auto')),
        credits integer not null check (credits >= 0),
        project text,
        idempotency_key text,
        provider text not null,
        provider_job_id text,
        text_output text,
        output_asset_ids jsonb not null default '[]',
        error_code text,
        error_message text,
        timeline jsonb not null,
        queue_deadline timestamptz not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        started_at timestamptz,
        completed_at timestamptz
      )`);
    // Every list filter has an index ending in the keyset order (created_at desc, id desc).
    this.addSql('create index generations_ws_created_idx on generations (workspace_id, created_at desc, id desc)');
    this.addSql('create index generations_ws_status_idx on generations (workspace_id, status, created_at desc, id desc)');
    this.addSql('create index generations_ws_mode_idx on generations (workspace_id, mode, created_at desc, id desc)');
    this.addSql('create index generations_ws_model_idx on generations (workspace_id, model_id, created_at desc, id desc)');
    this.addSql('create index generations_ws_project_idx on generations (workspace_id, project, created_at desc, id desc) where project is not null');
    this.addSql('create index generations_api_key_idx on generations (api_key_id, created_at desc) where api_key_id is not null');
    this.addSql(`create index generations_active_idx on generations (created_at, id) where status in ('queued', 'reserved', 'submitted', 'running')`);

    this.addSql(`
      create table workspace_accounts (
        workspace_id text primary key references workspaces (id) on delete cascade,
        available_credits integer not null default 0 check (available_credits >= 0),
        reserved_credits integer not null default 0 check (reserved_credits >= 0),
        wallet_cents integer not null default 0 check (wallet_cents >= 0),
        reserved_wallet_cents integer not null default 0 check (reserved_wallet_cents >= 0),
        wallet_activated boolean not null default false,
        reservations jsonb not null default '{}',
        updated_at timestamptz not null
      )`);

    this.addSql(`
      create table credit_ledger (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        kind text not null check (kind in ('grant', 'reserve', 'capture', 'release', 'deposit')),
        credits integer not null,
        reserved_credits integer not null,
        wallet_cents integer not null,
        reserved_wallet_cents integer not null,
        generation_id text,
        reference text,
        created_at timestamptz not null
      )`);
    this.addSql('create index credit_ledger_ws_idx on credit_ledger (workspace_id, created_at desc, id desc)');
    // A generation is reserved, captured and released at most once; an external event is applied once.
    this.addSql('create unique index credit_ledger_generation_once on credit_ledger (workspace_id, kind, generation_id) where generation_id is not null');
    this.addSql('create unique index credit_ledger_reference_once on credit_ledger (workspace_id, kind, reference) where reference is not null');

    this.addSql(`
      create table idempotency_keys (
        workspace_id text not null references workspaces (id) on delete cascade,
        key text not null,
        request_hash text not null,
        response_status integer not null,
        response_body jsonb not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        primary key (workspace_id, key)
      )`);
    this.addSql('create index idempotency_keys_expiry_idx on idempotency_keys (expires_at)');

    this.addSql(`
      create table service_switches (
        name text primary key,
        enabled boolean not null,
        reason text,
        changed_at timestamptz not null
      )`);
  }

  override async down(): Promise<void> {
    for (const table of ['service_switches', 'idempotency_keys', 'credit_ledger', 'workspace_accounts', 'generations'])
      this.addSql(`drop table if exists ${table}`);
  }
}
