import { Migration } from '@mikro-orm/migrations';

/**
 * Webhook endpoints and their deliveries. A delivery is written in the same transaction as the terminal
 * state of its generation (one INSERT … SELECT over the workspace's active, subscribed endpoints), so no
 * event is lost between them. Its endpoint actor sends it and records every attempt on the row.
 */
export class Migration0007Webhooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table webhook_endpoints (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        url text not null,
        description text,
        event_types jsonb not null,
        status text not null check (status in ('active', 'disabled')),
        secret_sealed text not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        deleted_at timestamptz
      )`);
    this.addSql('create index webhook_endpoints_ws_idx on webhook_endpoints (workspace_id, created_at desc, id desc) where deleted_at is null');
    this.addSql(`
      create table webhook_deliveries (
        id text primary key,
        endpoint_id text not null references webhook_endpoints (id) on delete cascade,
        workspace_id text not null,
        generation_id text not null,
        event_type text not null,
        body text not null,
        status text not null check (status in ('pending', 'delivered', 'failed', 'expired')),
        failure_reason text,
        attempts jsonb not null default '[]',
        attempt_count integer not null default 0,
        next_attempt_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      )`);
    // History and retention walk one endpoint newest first; its actor and recovery read the pending ones oldest first.
    this.addSql('create index webhook_deliveries_endpoint_idx on webhook_deliveries (endpoint_id, id desc)');
    this.addSql(`create index webhook_deliveries_pending_idx on webhook_deliveries (endpoint_id, id) where status = 'pending'`);
  }
}
