import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { EmittedEvent } from './events.ts';
import { insertFirstDelivery, insertResends } from './resend.ts';

/** An event as kept in webhook_events. */
export type StoredEvent = EmittedEvent;

/** One stored event of a workspace (another workspace's is not found). */
export async function findEvent(em: SqlEntityManager, workspaceId: string, id: string): Promise<StoredEvent | undefined> {
  const [row] = await em.execute<
    Array<{ id: string; workspace_id: string; generation_id: string | null; event_type: string; body_rest: string; created_at: Date | string }>
  >('select id, workspace_id, generation_id, event_type, body_rest, created_at from webhook_events where id = ? and workspace_id = ?', [id, workspaceId]);
  if (!row) return undefined;
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    generationId: row.generation_id,
    eventType: row.event_type,
    rest: row.body_rest,
    createdAt: new Date(row.created_at),
  };
}

/**
 * Sends one event to one endpoint: if the endpoint had a delivery of it (still in its history), that
 * delivery is sent again, so the body's id is the one the receiver saw then; otherwise a first delivery
 * is made, whose body's id is its own. Returns the new delivery's id.
 */
export async function replayEvent(em: SqlEntityManager, endpoint: { id: string; workspaceId: string }, event: StoredEvent, now: number): Promise<string> {
  const [earlier] = await em.execute<Array<{ id: string }>>('select id from webhook_deliveries where endpoint_id = ? and event_id = ? order by id limit 1', [
    endpoint.id,
    event.id,
  ]);
  if (earlier) {
    const [id] = await insertResends(em, endpoint.id, [earlier.id], now);
    return id!;
  }
  return insertFirstDelivery(em, endpoint, event, now);
}
