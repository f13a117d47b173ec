/** Statements on webhook deliveries (webhook_deliveries): made, read by their endpoint actors, recorded, re-sent. */
import type { Database } from '../../database.ts';
import { WebhookDeliveryEntity, type DeliveryAttempt, type DeliveryStatus, type WebhookDeliveryRow } from '../../entities/webhook.ts';
import { shardCondition, type ShardScope } from '../../cluster/shard-sql.ts';
import { emOf } from '../orm.ts';
import type { Transaction } from '../transaction.ts';
import type { Unit } from '../unit.ts';

/** A pending delivery as an endpoint actor reads it. */
export interface PendingRow {
  id: string;
  event_type: string;
  body: string;
  attempts: DeliveryAttempt[] | string;
  next_attempt_at: Date | string | null;
  trace_parent: string | null;
}

/** One endpoint's oldest `limit` pending deliveries, in id order. */
export function readPending(db: Database, endpointId: string, limit: number): Promise<PendingRow[]> {
  return db.em().execute<PendingRow[]>(
    `select id, event_type, body, attempts, next_attempt_at, trace_parent from webhook_deliveries
           where endpoint_id = ? and status = 'pending' order by id limit ?`,
    [endpointId, limit],
  );
}

/**
 * The oldest pending deliveries of many endpoints in one statement: per request (same order), exactly what
 * readPending would return for it.
 */
export async function readPendingOfMany(db: Database, requests: Array<{ endpointId: string; limit: number }>): Promise<PendingRow[][]> {
  const rows = await db.em().execute<Array<PendingRow & { n: number }>>(
    `select e.n, d.id, d.event_type, d.body, d.attempts, d.next_attempt_at, d.trace_parent
         from jsonb_to_recordset(?::jsonb) as e(n integer, endpoint_id text, max_rows integer)
         cross join lateral (
           select id, event_type, body, attempts, next_attempt_at, trace_parent from webhook_deliveries w
           where w.endpoint_id = e.endpoint_id and w.status = 'pending' order by w.id limit e.max_rows
         ) d
         order by e.n, d.id`,
    [JSON.stringify(requests.map((r, n) => ({ n, endpoint_id: r.endpointId, max_rows: r.limit })))],
  );
  const byRequest: PendingRow[][] = requests.map(() => []);
  for (const { n, ...row } of rows) byRequest[n]!.push(row);
  return byRequest;
}

/** A delivery's whole new state, as an attempt's outcome leaves it. */
export interface DeliveryStateRecord {
  id: string;
  status: string;
  attempts: DeliveryAttempt[];
  attempt_count: number;
  next_attempt_at: string | null;
  failure_reason: string | null;
  updated_at: string;
}

/**
 * The new states of many deliveries, in at most two UPDATEs joined by id; a delivery no longer pending is
 * left as it is.
 *
 * Most deliveries are delivered at their first attempt: their whole state is then known from that attempt
 * alone (delivered, one attempt, no next attempt, no failure), so they are sent as a short tuple and the
 * statement builds the same row (the same jsonb) from it; every other state is sent whole.
 *
 * Both statements find each row by its primary key. Their `status = 'pending'` is compared in the "C"
 * collation (the same test: equality of text is bytewise in any deterministic collation) so that it does
 * not match the predicate of the partial index webhook_deliveries_pending_idx: without statistics (PGlite
 * never analyzes) the planner takes the pending rows for few and would otherwise read every pending row
 * of every endpoint through that index and hash-join them to the batch, tens of times slower than one
 * primary-key lookup per recorded delivery.
 */
export async function writeDeliveryStates(em: Transaction, records: Iterable<DeliveryStateRecord>): Promise<void> {
  // [id, at, responseStatus, durationMs, updated_at] of each delivery delivered at its first attempt.
  const first: Array<[string, string, number, number, string]> = [];
  const whole: DeliveryStateRecord[] = [];
  for (const row of records) {
    const attempt = row.attempts[0];
    if (
      row.status === 'delivered' &&
      row.attempts.length === 1 &&
      attempt!.attemptNumber === 1 &&
      attempt!.error === null &&
      attempt!.responseStatus !== null &&
      row.next_attempt_at === null &&
      row.failure_reason === null
    ) {
      first.push([row.id, attempt!.at, attempt!.responseStatus, attempt!.durationMs, row.updated_at]);
    } else {
      whole.push(row);
    }
  }
  if (first.length > 0) {
    await em.execute(
      `update webhook_deliveries d set status = 'delivered',
               attempts = jsonb_build_array(jsonb_build_object('attemptNumber', 1, 'at', v ->> 1, 'responseStatus', (v ->> 2)::integer, 'error', null, 'durationMs', (v ->> 3)::integer)),
               attempt_count = 1, next_attempt_at = null, failure_reason = null, updated_at = (v ->> 4)::timestamptz
             from jsonb_array_elements(?::jsonb) as v
             where d.id = v ->> 0 and d.status = 'pending' collate "C"`,
      [JSON.stringify(first)],
      'run',
    );
  }
  if (whole.length > 0) {
    await em.execute(
      `update webhook_deliveries d set status = v.status, attempts = v.attempts, attempt_count = v.attempt_count,
               next_attempt_at = v.next_attempt_at, failure_reason = v.failure_reason, updated_at = v.updated_at
             from jsonb_to_recordset(?::jsonb) as v(id text, status text, attempts jsonb, attempt_count integer, next_attempt_at timestamptz, failure_reason text, updated_at timestamptz)
             where d.id = v.id and d.status = 'pending' collate "C"`,
      [JSON.stringify(whole)],
      'run',
    );
  }
}

/** A delivery's final state, written whatever it was. */
export async function writeDeliveryFinal(
  em: Transaction,
  id: string,
  state: { status: DeliveryStatus; attempts: DeliveryAttempt[]; failureReason?: string | undefined },
  at: Date,
): Promise<void> {
  await em.execute(
    `update webhook_deliveries set status = ?, attempts = ?::jsonb, attempt_count = ?, next_attempt_at = null, failure_reason = ?, updated_at = ?
     where id = ? returning id`,
    [state.status, JSON.stringify(state.attempts), state.attempts.length, state.failureReason ?? null, at, id],
  );
}

/** A delivery's attempts and status, or undefined if it is gone. */
export async function readDeliveryAttempts(em: Transaction, id: string): Promise<{ attempts: DeliveryAttempt[]; status: DeliveryStatus } | undefined> {
  const rows = await em.execute<Array<{ attempts: DeliveryAttempt[] | string; status: DeliveryStatus }>>(
    'select attempts, status from webhook_deliveries where id = ?',
    [id],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { attempts: typeof row.attempts === 'string' ? (JSON.parse(row.attempts) as DeliveryAttempt[]) : row.attempts, status: row.status };
}

/** A delivery's attempts replaced, its status left as it is (an attempt recorded after the delivery was failed). */
export async function writeDeliveryAttempts(em: Transaction, id: string, attempts: DeliveryAttempt[], at: Date): Promise<void> {
  await em.execute('update webhook_deliveries set attempts = ?::jsonb, attempt_count = ?, updated_at = ? where id = ? returning id', [
    JSON.stringify(attempts),
    attempts.length,
    at,
    id,
  ]);
}

/** Every pending delivery of the endpoint failed with the reason. */
export async function failPendingDeliveries(em: Transaction, endpointId: string, reason: string, at: Date): Promise<void> {
  await em.execute(
    `update webhook_deliveries set status = 'failed', failure_reason = ?, next_attempt_at = null, updated_at = ?
       where endpoint_id = ? and status = 'pending' returning id`,
    [reason, at, endpointId],
  );
}

/** The endpoints with a pending delivery (of one shard's workspaces, with `scope`). */
export async function endpointsWithPending(db: Database, scope?: ShardScope): Promise<string[]> {
  const only = shardCondition('workspace_id', scope);
  const rows = await db
    .em()
    .execute<Array<{ endpoint_id: string }>>(`select distinct endpoint_id from webhook_deliveries where status = 'pending'${only.sql}`, only.params);
  return rows.map((row) => row.endpoint_id);
}

/** A first delivery of one event to each of some endpoints of a workspace (made now, pending). */
export interface EndpointDelivery {
  id: string;
  endpoint_id: string;
  event_id: string;
  body: string;
  /** When made: its created_at, updated_at and first attempt time. */
  at: Date;
}

/** First deliveries of events with no generation (budget crossings), each to one endpoint of a workspace, one statement for any number. */
export async function insertEndpointDeliveries(em: Transaction, workspaceId: string, eventType: string, rows: EndpointDelivery[]): Promise<void> {
  await em.execute(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, resend_of, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at)
     select v.id, v.endpoint_id, ?, null, ?, v.event_id, null, v.body, 'pending', '[]'::jsonb, 0, v.at, v.at, v.at
     from jsonb_to_recordset(?::jsonb) as v(id text, endpoint_id text, event_id text, body text, at timestamptz)`,
    [workspaceId, eventType, JSON.stringify(rows.map((r) => ({ ...r, at: r.at.toISOString() })))],
    'run',
  );
}

/** First deliveries of one event with no generation (an endpoint disabled) to some endpoints of a workspace, in one statement. */
export async function insertEventToEndpoints(
  em: Transaction,
  event: { id: string; workspaceId: string; eventType: string },
  rows: Array<{ id: string; endpoint_id: string; body: string }>,
  at: Date,
): Promise<void> {
  await em.execute(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, resend_of, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at)
     select v.id, v.endpoint_id, ?, null, ?, ?, null, v.body, 'pending', '[]'::jsonb, 0, ?, ?, ?
     from jsonb_to_recordset(?::jsonb) as v(id text, endpoint_id text, body text)`,
    [event.workspaceId, event.eventType, event.id, at, at, at, JSON.stringify(rows)],
    'run',
  );
}

/** The deliveries to make for one event of one generation: one per subscribed endpoint counted. */
export interface EventDeliveryRows {
  generation_id: string;
  workspace_id: string;
  event_type: string;
  event_id: string | null;
  created_at: Date;
  trace_parent: string | null;
  /** The body after its id, so each delivery's body is `{"id":"dlv_…",` + this, exactly as it will be signed. */
  rest: string;
  /** In creation order, so each endpoint's deliveries sort by id in the order of their events. */
  ids: string[];
}

/**
 * One INSERT … SELECT of the deliveries of many events (at most one per generation) over the active endpoints
 * subscribed to each: the endpoints of an event take its ids in endpoint id order. An endpoint made since the
 * count (beyond the ids made) waits for the next event: never a delivery without an id. Returns the pairs made.
 */
export function insertEventDeliveries(em: Transaction, rows: EventDeliveryRows[]): Promise<Array<{ generation_id: string; endpoint_id: string }>> {
  return em.execute<Array<{ generation_id: string; endpoint_id: string }>>(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at, trace_parent)
     select m.delivery_id, m.endpoint_id, m.workspace_id, m.generation_id, m.event_type, m.event_id, '{"id":"' || m.delivery_id || '",' || m.rest,
       'pending', '[]'::jsonb, 0, m.created_at, m.created_at, m.created_at, m.trace_parent
     from (
       select e.id as endpoint_id, s.workspace_id, s.generation_id, s.event_type, s.event_id, s.rest, s.created_at, s.trace_parent,
         s.ids ->> ((row_number() over (partition by s.generation_id order by e.id))::int - 1) as delivery_id
       from jsonb_to_recordset(?::jsonb) as s(generation_id text, workspace_id text, event_type text, event_id text, rest text, created_at timestamptz, ids jsonb, trace_parent text)
       join webhook_endpoints e on e.workspace_id = s.workspace_id and e.status = 'active' and e.deleted_at is null and e.event_types @> jsonb_build_array(s.event_type)
     ) m
     where m.delivery_id is not null
     returning generation_id, endpoint_id`,
    [JSON.stringify(rows)],
  );
}

/**
 * New pending deliveries, each a copy of its original (of this endpoint) byte for byte with `resend_of`
 * naming it, its trace and the id given. One statement for any number; returns the ids made (an original
 * not of this endpoint makes none).
 */
export async function insertResendCopies(unit: Unit, endpointId: string, pairs: Array<{ id: string; original: string }>, at: Date): Promise<string[]> {
  const rows = await emOf(unit).execute<Array<{ id: string }>>(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, resend_of, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at, trace_parent)
     select v.id, o.endpoint_id, o.workspace_id, o.generation_id, o.event_type, o.event_id, o.id, o.body, 'pending', '[]'::jsonb, 0, ?, ?, ?, o.trace_parent
     from jsonb_to_recordset(?::jsonb) as v(id text, original text)
     join webhook_deliveries o on o.id = v.original and o.endpoint_id = ?
     returning id`,
    [at, at, at, JSON.stringify(pairs), endpointId],
  );
  return rows.map((r) => r.id);
}

/** One first delivery of a stored event to an endpoint. */
export async function insertFirstDelivery(
  unit: Unit,
  delivery: { id: string; endpointId: string; workspaceId: string; generationId: string | null; eventType: string; eventId: string; body: string },
  at: Date,
): Promise<void> {
  await emOf(unit).execute(
    `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, event_id, resend_of, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, null, ?, 'pending', '[]'::jsonb, 0, ?, ?, ?)`,
    [delivery.id, delivery.endpointId, delivery.workspaceId, delivery.generationId, delivery.eventType, delivery.eventId, delivery.body, at, at, at],
  );
}

/** A delivery as the API shows it, read in the transaction that made it. */
export function readDelivery(unit: Unit, id: string): Promise<WebhookDeliveryRow> {
  return emOf(unit).findOneOrFail(WebhookDeliveryEntity, { id });
}

/** The endpoint's first delivery of an event, if it still has one. */
export async function firstDeliveryOfEvent(unit: Unit, endpointId: string, eventId: string): Promise<string | undefined> {
  const [earlier] = await emOf(unit).execute<Array<{ id: string }>>(
    'select id from webhook_deliveries where endpoint_id = ? and event_id = ? order by id limit 1',
    [endpointId, eventId],
  );
  return earlier?.id;
}

/**
 * The endpoint's failed and expired deliveries made in [since, until), oldest first, at most `limit`, but
 * those whose re-send is still pending.
 */
export function failedDeliveriesIn(
  unit: Unit,
  endpointId: string,
  since: Date,
  until: Date,
  limit: number,
): Promise<Array<{ id: string; created_at: Date | string }>> {
  return emOf(unit).execute<Array<{ id: string; created_at: Date | string }>>(
    `select d.id, d.created_at from webhook_deliveries d
     where d.endpoint_id = ? and d.status in ('failed', 'expired') and d.created_at >= ? and d.created_at < ?
       and not exists (select 1 from webhook_deliveries r where r.resend_of = d.id and r.status = 'pending')
     order by d.created_at, d.id
     limit ?`,
    [endpointId, since, until, limit],
  );
}

/**
 * A page of an endpoint's deliveries, newest first (ids are time-sortable, and the id alone is the keyset),
 * of one status when given, before the id of the page before.
 */
export function listEndpointDeliveries(
  unit: Unit,
  endpoint: { id: string; workspaceId: string },
  filter: { status?: string | undefined; before?: string | undefined },
  limit: number,
): Promise<WebhookDeliveryRow[]> {
  const where: Record<string, unknown> = { endpointId: endpoint.id, workspaceId: endpoint.workspaceId };
  if (filter.status) where.status = filter.status;
  if (filter.before !== undefined) where.id = { $lt: filter.before };
  return emOf(unit).find(WebhookDeliveryEntity, where, { orderBy: { id: 'desc' }, limit });
}
