import { Migration } from '@mikro-orm/migrations';

/**
 * Webhook signing: a scheme per endpoint, secret rotation with an overlap, and each delivery's trace context.
 *
 * - `webhook_endpoints.signature_scheme`: `x-service` (the X-Service-Signature of docs/webhooks.md, the
 *   default) or `standard` (the Standard Webhooks headers).
 * - `previous_secret_sealed` / `previous_secret_expires_at`: the secret a rotation replaced, sealed like the
 *   current one (bound to the same endpoint id), which still signs every delivery until it expires.
 * - `webhook_deliveries.trace_parent`: the W3C traceparent of the work that made the delivery (the
 *   generation's trace), so every attempt, a retry after a restart too, continues that trace.
 * - A partial index finds the endpoints that asked for the opt-in `generation.started` event: the write of
 *   a job's transition to running reads it, and finds nothing in the common case at once.
 */
export class Migration0016WebhookSigning extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhook_endpoints
      add column signature_scheme text not null default 'x-service' check (signature_scheme in ('x-service', 'standard')),
      add column previous_secret_sealed text,
      add column previous_secret_expires_at timestamptz`);
    this.addSql('alter table webhook_deliveries add column trace_parent text');
    this.addSql(`create index webhook_endpoints_started_idx on webhook_endpoints (workspace_id)
      where deleted_at is null and status = 'active' and event_types @> '["generation.started"]'::jsonb`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists webhook_endpoints_started_idx');
    this.addSql('alter table webhook_deliveries drop column if exists trace_parent');
    this.addSql(`alter table webhook_endpoints drop column if exists signature_scheme, drop column if exists previous_secret_sealed,
      drop column if exists previous_secret_expires_at`);
  }
}
