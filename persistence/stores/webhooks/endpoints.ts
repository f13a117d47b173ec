/** Statements on webhook endpoints (webhook_endpoints): those of the API's routes, of the endpoint actors and of the events they emit. */
import type { Database } from '../../database.ts';
import { WebhookEndpointEntity, type WebhookEndpointRow } from '../../entities/webhook.ts';
import { emOf } from '../orm.ts';
import type { Transaction } from '../transaction.ts';
import type { Unit } from '../unit.ts';

/** An endpoint not deleted, or null. */
export function findLiveEndpoint(db: Database, id: string): Promise<WebhookEndpointRow | null> {
  return db.em().findOne(WebhookEndpointEntity, { id, deletedAt: null });
}

/** An endpoint not deleted, or null, read in a request's unit of work. */
export function findLiveEndpointIn(unit: Unit, id: string): Promise<WebhookEndpointRow | null> {
  return emOf(unit).findOne(WebhookEndpointEntity, { id, deletedAt: null });
}

/** How many endpoints a workspace has, deleted ones left out. */
export function countLiveEndpoints(unit: Unit, workspaceId: string): Promise<number> {
  return emOf(unit).count(WebhookEndpointEntity, { workspaceId, deletedAt: null });
}

/** A new endpoint's row. */
export async function insertEndpoint(unit: Unit, row: WebhookEndpointRow): Promise<void> {
  await emOf(unit).insert(WebhookEndpointEntity, row);
}

/** A page of a workspace's endpoints not deleted, newest first, after the `(createdAt, id)` of the page before. */
export function listEndpoints(unit: Unit, workspaceId: string, page: { after?: [at: Date, id: string]; limit: number }): Promise<WebhookEndpointRow[]> {
  const where: Record<string, unknown> = { workspaceId, deletedAt: null };
  if (page.after) {
    const [at, id] = page.after;
    where.$or = [{ createdAt: { $lt: at } }, { createdAt: at, id: { $lt: id } }];
  }
  return emOf(unit).find(WebhookEndpointEntity, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: page.limit });
}

/** An endpoint's health columns (auto-disable): failingSince in ms, undefined after a success. */
export interface EndpointHealthColumns {
  failingSince: number | undefined;
  consecutiveExpired: number;
}

const healthDate = (health: EndpointHealthColumns): Date | null => (health.failingSince === undefined ? null : new Date(health.failingSince));

/** The health columns after a change that needs no disabling. */
export async function writeEndpointHealth(em: Transaction, endpointId: string, health: EndpointHealthColumns): Promise<void> {
  await em.execute('update webhook_endpoints set failing_since = ?, consecutive_expired = ? where id = ? returning id', [
    healthDate(health),
    health.consecutiveExpired,
    endpointId,
  ]);
}

/** The endpoint disabled by the service, with its reason and health. */
export async function writeEndpointDisabled(em: Transaction, endpointId: string, reason: string, health: EndpointHealthColumns, at: Date): Promise<void> {
  await em.execute(
    `update webhook_endpoints set status = 'disabled', disabled_reason = ?, failing_since = ?, consecutive_expired = ?, updated_at = ?
     where id = ? and deleted_at is null returning id`,
    [reason, healthDate(health), health.consecutiveExpired, at, endpointId],
  );
}

/** The columns an update of an endpoint writes (PATCH, through its actor). */
export type EndpointChange = Pick<
  WebhookEndpointRow,
  | 'url'
  | 'description'
  | 'eventTypes'
  | 'status'
  | 'signatureScheme'
  | 'secretSealed'
  | 'previousSecretSealed'
  | 'previousSecretExpiresAt'
  | 'disabledReason'
  | 'failingSince'
  | 'consecutiveExpired'
>;

export async function writeEndpointChange(em: Transaction, endpointId: string, next: EndpointChange, at: Date): Promise<void> {
  await em.execute(
    `update webhook_endpoints set url = ?, description = ?, event_types = ?::jsonb, status = ?, updated_at = ?,
         signature_scheme = ?, secret_sealed = ?, previous_secret_sealed = ?, previous_secret_expires_at = ?,
         disabled_reason = ?, failing_since = ?, consecutive_expired = ?
       where id = ? and deleted_at is null returning id`,
    [
      next.url,
      next.description,
      JSON.stringify(next.eventTypes),
      next.status,
      at,
      next.signatureScheme,
      next.secretSealed,
      next.previousSecretSealed,
      next.previousSecretExpiresAt,
      next.disabledReason,
      next.failingSince,
      next.consecutiveExpired,
      endpointId,
    ],
  );
}

/** The endpoint deleted: its sealed secrets wiped; the row stays until the retention job purges it. */
export async function writeEndpointDeleted(em: Transaction, endpointId: string, at: Date): Promise<void> {
  await em.execute(
    "update webhook_endpoints set deleted_at = ?, updated_at = ?, secret_sealed = '', previous_secret_sealed = null, previous_secret_expires_at = null where id = ? and deleted_at is null returning id",
    [at, at, endpointId],
  );
}

/** A rotation's secrets. */
export async function writeEndpointSecrets(
  em: Transaction,
  endpointId: string,
  secrets: Pick<WebhookEndpointRow, 'secretSealed' | 'previousSecretSealed' | 'previousSecretExpiresAt'>,
  at: Date,
): Promise<void> {
  await em.execute(
    `update webhook_endpoints set secret_sealed = ?, previous_secret_sealed = ?, previous_secret_expires_at = ?, updated_at = ?
       where id = ? and deleted_at is null returning id`,
    [secrets.secretSealed, secrets.previousSecretSealed, secrets.previousSecretExpiresAt, at, endpointId],
  );
}

/**
 * Closes the race between an endpoint's creation and an event: a transaction that writes an event's
 * deliveries first takes its workspaces' rows FOR SHARE, in a statement of its own, before it reads
 * the subscribed endpoints. Creation holds the same row FOR UPDATE until it commits
 * (http/routes/webhooks/create.ts), so either the creation committed before this statement (and the reads
 * after it, each with a fresh snapshot, see the endpoint: it gets the event), or it waits for the event's
 * commit (and the endpoint only gets later events). Without it, an endpoint committed between the count of
 * subscribed endpoints and the INSERT of their deliveries was silently left out. Rows in id order, so two
 * such transactions never wait on each other in a cycle (FOR SHARE never conflicts with FOR SHARE anyway).
 */
export async function holdSubscriptions(em: Transaction, workspaceIds: Iterable<string>): Promise<void> {
  const ids = [...new Set(workspaceIds)];
  if (ids.length === 0) return;
  await em.execute('select id from workspaces where id in (select value from jsonb_array_elements_text(?::jsonb)) order by id for share', [
    JSON.stringify(ids),
  ]);
}

/** The active endpoints of a workspace subscribed to an event type, in id order, but `except`. */
export async function subscribedEndpoints(em: Transaction, workspaceId: string, eventType: string, except?: string): Promise<string[]> {
  const rows =
    except === undefined
      ? await em.execute<Array<{ id: string }>>(
          `select id from webhook_endpoints where workspace_id = ? and status = 'active' and deleted_at is null
       and event_types @> jsonb_build_array(?::text) order by id`,
          [workspaceId, eventType],
        )
      : await em.execute<Array<{ id: string }>>(
          `select id from webhook_endpoints where workspace_id = ? and id <> ? and status = 'active' and deleted_at is null
       and event_types @> jsonb_build_array(?::text) order by id`,
          [workspaceId, except, eventType],
        );
  return rows.map((r) => r.id);
}

/** Per (workspace, event type) asked, how many active endpoints subscribe to it; pairs with none are left out. */
export function countSubscribed(
  em: Transaction,
  wanted: Array<{ workspace_id: string; event_type: string }>,
): Promise<Array<{ workspace_id: string; event_type: string; n: number | string }>> {
  return em.execute<Array<{ workspace_id: string; event_type: string; n: number | string }>>(
    `select w.workspace_id, w.event_type, count(*) as n
     from jsonb_to_recordset(?::jsonb) as w(workspace_id text, event_type text)
     join webhook_endpoints e on e.workspace_id = w.workspace_id and e.status = 'active' and e.deleted_at is null and e.event_types @> jsonb_build_array(w.event_type)
     group by w.workspace_id, w.event_type`,
    [JSON.stringify(wanted)],
  );
}

/** Active, undeleted endpoints `e` subscribed to generation.started: the predicate of webhook_endpoints_started_idx. */
const STARTED_SUBSCRIBED = `e.deleted_at is null and e.status = 'active' and e.event_types @> '["generation.started"]'::jsonb`;

/**
 * Whether the workspace of the generation `g` (of the statement this goes in) has an endpoint that asked for
 * generation.started: a lookup in the partial index, so the common case (none) costs no statement of its own.
 */
export const STARTED_WANTED = `exists (select 1 from webhook_endpoints e where e.workspace_id = g.workspace_id and ${STARTED_SUBSCRIBED})`;

/** Per workspace, how many endpoints subscribe to generation.started; workspaces with none are left out. */
export function countStartedSubscribers(em: Transaction, workspaceIds: string[]): Promise<Array<{ workspace_id: string; n: number | string }>> {
  return em.execute<Array<{ workspace_id: string; n: number | string }>>(
    `select e.workspace_id, count(*) as n from webhook_endpoints e
     where e.workspace_id in (select value from jsonb_array_elements_text(?::jsonb)) and ${STARTED_SUBSCRIBED}
     group by e.workspace_id`,
    [JSON.stringify(workspaceIds)],
  );
}
