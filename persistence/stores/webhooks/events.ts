/** Statements on kept webhook events (webhook_events). */
import { emOf } from '../orm.ts';
import type { Transaction } from '../transaction.ts';
import type { Unit } from '../unit.ts';

/** An event as stored: the delivery body after its `"id":…,`, so each delivery's body is `{"id":"dlv_…",` + rest. */
export interface StoredEvent {
  id: string;
  workspaceId: string;
  generationId: string | null;
  eventType: string;
  rest: string;
  createdAt: Date;
}

/**
 * Writes events in one statement, inside the transaction that emits them (a settlement's, an endpoint's
 * disabling), so an event is kept exactly when it happened. Every event is kept, subscribed or not: an
 * endpoint made later can still be sent one (POST /v1/webhooks/:id/replay).
 */
export async function insertEvents(em: Transaction, events: StoredEvent[]): Promise<void> {
  if (events.length === 0) return;
  await em.execute(
    `insert into webhook_events (id, workspace_id, generation_id, event_type, body_rest, created_at)
     select id, workspace_id, generation_id, event_type, body_rest, created_at
     from jsonb_to_recordset(?::jsonb) as v(id text, workspace_id text, generation_id text, event_type text, body_rest text, created_at timestamptz)`,
    [
      JSON.stringify(
        events.map((e) => ({
          id: e.id,
          workspace_id: e.workspaceId,
          generation_id: e.generationId,
          event_type: e.eventType,
          body_rest: e.rest,
          created_at: e.createdAt.toISOString(),
        })),
      ),
    ],
    'run',
  );
}

/** A stored event as read. */
interface EventRow {
  id: string;
  workspace_id: string;
  generation_id: string | null;
  event_type: string;
  body_rest: string;
  created_at: Date | string;
}

function toStoredEvent(row: EventRow): StoredEvent {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    generationId: row.generation_id,
    eventType: row.event_type,
    rest: row.body_rest,
    createdAt: new Date(row.created_at),
  };
}

/** One stored event of a workspace (another workspace's is not found). */
export async function findEvent(unit: Unit, workspaceId: string, id: string): Promise<StoredEvent | undefined> {
  const [row] = await emOf(unit).execute<EventRow[]>(
    'select id, workspace_id, generation_id, event_type, body_rest, created_at from webhook_events where id = ? and workspace_id = ?',
    [id, workspaceId],
  );
  return row ? toStoredEvent(row) : undefined;
}

/** Which of a workspace's events a page holds: of one type, made in [from, to), before the id of the page before; each when given. */
export interface EventFilter {
  type?: string | undefined;
  from?: Date | undefined;
  to?: Date | undefined;
  before?: string | undefined;
}

/** A page of a workspace's stored events, newest first: ids are time-sortable, and the id alone is the keyset. */
export async function listWorkspaceEvents(unit: Unit, workspaceId: string, filter: EventFilter, limit: number): Promise<StoredEvent[]> {
  const where = ['workspace_id = ?'];
  const params: unknown[] = [workspaceId];
  if (filter.type) {
    where.push('event_type = ?');
    params.push(filter.type);
  }
  if (filter.from) {
    where.push('created_at >= ?');
    params.push(filter.from);
  }
  if (filter.to) {
    where.push('created_at < ?');
    params.push(filter.to);
  }
  if (filter.before !== undefined) {
    where.push('id < ?');
    params.push(filter.before);
  }
  const rows = await emOf(unit).execute<EventRow[]>(
    `select id, workspace_id, generation_id, event_type, body_rest, created_at from webhook_events where ${where.join(' and ')} order by id desc limit ?`,
    [...params, limit],
  );
  return rows.map(toStoredEvent);
}
