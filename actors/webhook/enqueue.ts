import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { GenerationRow } from '../../persistence/entities/generation.ts';
import { newId } from '../../persistence/ids.ts';
import { EVENT_OF, type TerminalStatus } from '../generation/state.ts';

/** A workspace has at most this many webhook endpoints (deleted ones aside); creation takes the workspace lock to keep it so. */
export const MAX_ENDPOINTS_PER_WORKSPACE = 20;

/** The event body of SPEC.md section 6 without its `id` (each endpoint's delivery has its own). */
export function eventBody(generation: GenerationRow, status: TerminalStatus, createdAt: Date): { event: string; data: Record<string, unknown>; createdAt: string } {
  const data: Record<string, unknown> = {
    generationId: generation.id,
    workspaceId: generation.workspaceId,
    mode: generation.mode,
    modelId: generation.modelId,
    status,
    outputAssetIds: generation.outputAssetIds ?? [],
    credits: generation.credits,
    startedAt: generation.startedAt?.toISOString() ?? null,
    completedAt: generation.completedAt?.toISOString() ?? null,
  };
  if (status === 'failed') {
    data.errorCode = generation.errorCode;
    data.errorMessage = generation.errorMessage;
  }
  return { event: EVENT_OF[status], data, createdAt: createdAt.toISOString() };
}

export interface DeliveriesOnSettle {
  /** Runs inside the settle transaction: one delivery per active, subscribed endpoint of the workspace. */
  write(em: SqlEntityManager): Promise<void>;
  /** After the commit: the endpoints that got a delivery, to wake. */
  endpointIds(): string[];
}

/**
 * The deliveries of a generation's terminal event, made by one INSERT … SELECT over the workspace's
 * endpoints inside the same transaction as the terminal state (after a count that sizes the ids, and
 * that alone when the workspace has no subscribed endpoint): the endpoints are read in that transaction,
 * and the event and its deliveries commit (or not) together.
 */
export function deliveriesOnSettle(generation: GenerationRow, status: TerminalStatus, now: number): DeliveriesOnSettle {
  let endpoints: string[] = [];
  return {
    async write(em) {
      // The unit may run again if its batch is retried alone; each run starts afresh.
      endpoints = [];
      const subscribed = JSON.stringify([EVENT_OF[status]]);
      // How many ids to make (most workspaces have no endpoint: then this is the only statement).
      const [counted] = await em.execute<Array<{ n: number | string }>>(
        `select count(*) as n from webhook_endpoints where workspace_id = ? and status = 'active' and deleted_at is null and event_types @> ?::jsonb`,
        [generation.workspaceId, subscribed],
      );
      const count = Math.min(Number(counted?.n ?? 0), MAX_ENDPOINTS_PER_WORKSPACE);
      if (count === 0) return;
      const createdAt = new Date(now);
      const { event, data, createdAt: created } = eventBody(generation, status, createdAt);
      // The body after its id, so each delivery's body is `{"id":"dlv_…",` + this, exactly as it will be signed.
      const rest = JSON.stringify({ event, data, createdAt: created }).slice(1);
      const ids = Array.from({ length: count }, () => newId('dlv', now));
      // An endpoint made since the count (the newest id) waits for the next event: never a delivery without an id.
      const rows = await em.execute<Array<{ endpoint_id: string }>>(
        `insert into webhook_deliveries (id, endpoint_id, workspace_id, generation_id, event_type, body, status, attempts, attempt_count, next_attempt_at, created_at, updated_at)
         select m.delivery_id, m.id, m.workspace_id, ?, ?, '{"id":"' || m.delivery_id || '",' || ?, 'pending', '[]'::jsonb, 0, ?, ?, ?
         from (
           select e.id, e.workspace_id, (?::jsonb) ->> ((row_number() over (order by e.id))::int - 1) as delivery_id
           from webhook_endpoints e
           where e.workspace_id = ? and e.status = 'active' and e.deleted_at is null and e.event_types @> ?::jsonb
         ) m
         where m.delivery_id is not null
         returning endpoint_id`,
        [generation.id, event, rest, createdAt, createdAt, createdAt, JSON.stringify(ids), generation.workspaceId, subscribed],
      );
      endpoints = rows.map((row) => row.endpoint_id);
    },
    endpointIds: () => endpoints,
  };
}
