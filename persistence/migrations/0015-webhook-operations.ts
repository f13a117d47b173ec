import { Migration } from '@mikro-orm/migrations';

/**
 * Webhook operations: resend, recover, replay of events and auto-disable.
 *
 * - `webhook_events`: every event the service emits (a generation's terminal state, an endpoint disabled),
 *   written in the transaction that emits it, whether or not an endpoint subscribes; kept EVENT_RETENTION
 *   (actors/webhook/retention.ts), and gone with its workspace. `body_rest` is the delivery body after its id, byte for byte, so a replay
 *   sends what the first delivery sent.
 * - `webhook_deliveries.event_id` links a delivery to its event; `resend_of` to the delivery it sends again
 *   (resend, recover, replay), whose body it copies. A delivery of an endpoint event has no generation.
 * - `webhook_endpoints`: why it was disabled (null when by PATCH or active), and its health: when its current
 *   run of failed attempts began (null after a success) and how many deliveries in a row expired.
 * - `webhook_recoveries`: the answer of each recover request made with an Idempotency-Key, per endpoint.
 */
export class Migration0015WebhookOperations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table webhook_events (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        generation_id text,
        event_type text not null,
        body_rest text not null,
        created_at timestamptz not null
      )`);
    // GET /v1/events: one workspace newest first, with or without a type; retention by time.
    this.addSql('create index webhook_events_ws_idx on webhook_events (workspace_id, id desc)');
    this.addSql('create index webhook_events_ws_type_idx on webhook_events (workspace_id, event_type, id desc)');
    this.addSql('create index webhook_events_created_idx on webhook_events (created_at)');
    this.addSql('alter table webhook_deliveries add column event_id text, add column resend_of text, alter column generation_id drop not null');
    // Recover walks one endpoint's failed and expired deliveries by time; replay finds an event's earlier delivery.
    this.addSql(`create index webhook_deliveries_unsent_idx on webhook_deliveries (endpoint_id, created_at, id) where status in ('failed', 'expired')`);
    this.addSql('create index webhook_deliveries_event_idx on webhook_deliveries (endpoint_id, event_id) where event_id is not null');
    this.addSql('create index webhook_deliveries_resend_idx on webhook_deliveries (resend_of) where resend_of is not null');
    this.addSql(`alter table webhook_endpoints
      add column disabled_reason text,
      add column failing_since timestamptz,
      add column consecutive_expired integer not null default 0`);
    this.addSql(`
      create table webhook_recoveries (
        endpoint_id text not null references webhook_endpoints (id) on delete cascade,
        idempotency_key text not null,
        workspace_id text not null,
        request_hash text not null,
        answer jsonb not null,
        created_at timestamptz not null,
        primary key (endpoint_id, idempotency_key)
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists webhook_recoveries');
    this.addSql('drop table if exists webhook_events');
    this.addSql('drop index if exists webhook_deliveries_unsent_idx');
    this.addSql('drop index if exists webhook_deliveries_event_idx');
    this.addSql('drop index if exists webhook_deliveries_resend_idx');
    this.addSql('alter table webhook_deliveries drop column if exists event_id, drop column if exists resend_of');
    this.addSql(
      'alter table webhook_endpoints drop column if exists disabled_reason, drop column if exists failing_since, drop column if exists consecutive_expired',
    );
  }
}
