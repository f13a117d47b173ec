import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { GenerationRow } from '../../persistence/entities/generation.ts';
import { newId } from '../../persistence/ids.ts';
import { insertDeliveries, MAX_ENDPOINTS_PER_WORKSPACE, type EventDeliveryRows } from './enqueue.ts';
import { holdSubscriptions } from './subscription-lock.ts';

/**
 * `generation.started`, sent beside the events of terminal states (docs/webhooks.md): the job is
 * running at its provider. Opt-in: only endpoints that name it in eventTypes get it, so the others
 * receive exactly the four terminal events, as before.
 */
export const STARTED_EVENT = 'generation.started';

/** A generation's move to running, to be delivered to the endpoints of its workspace that asked for it. */
export interface StartedEvent {
  generation: GenerationRow;
  at: number;
  /** The generation's trace (W3C traceparent) when it started; each attempt continues it. */
  traceParent: string | null;
}

/** The event body (docs/webhooks.md, What arrives) for a running job (its `id` comes first, per delivery): no outputs, no end yet. */
export function startedEventBody(generation: GenerationRow, createdAt: Date): { event: string; data: Record<string, unknown>; createdAt: string } {
  return {
    event: STARTED_EVENT,
    data: {
      generationId: generation.id,
      workspaceId: generation.workspaceId,
      mode: generation.mode,
      modelId: generation.modelId,
      status: 'running',
      outputAssetIds: [],
      credits: generation.credits,
      startedAt: generation.startedAt?.toISOString() ?? null,
      completedAt: null,
    },
    createdAt: createdAt.toISOString(),
  };
}

/** Active, undeleted endpoints `e` subscribed to generation.started: the predicate of webhook_endpoints_started_idx. */
const SUBSCRIBED = `e.deleted_at is null and e.status = 'active' and e.event_types @> '["generation.started"]'::jsonb`;

/**
 * Whether the workspace of the generation `g` (of the statement this goes in) has an endpoint that asked for
 * generation.started: a lookup in the partial index, so the common case (none) costs no statement of its own.
 */
export const STARTED_WANTED = `exists (select 1 from webhook_endpoints e where e.workspace_id = g.workspace_id and ${SUBSCRIBED})`;

/**
 * The deliveries of many jobs' moves to running, written inside the transaction that commits those moves
 * (as the terminal events' are with theirs), for jobs whose workspace has an endpoint that asked for the
 * event (STARTED_WANTED): the workspaces' rows are held (subscription-lock.ts, so an endpoint created
 * meanwhile is either counted and sent the event, or created after this commits), their subscribed
 * endpoints counted, then one INSERT … SELECT. The ids are made now, after any earlier event of these
 * jobs, so each endpoint gets a job's `generation.started` before its terminal event. Returns, per event
 * (same order), the endpoints that got one.
 */
export async function writeStartedDeliveries(em: SqlEntityManager, events: StartedEvent[]): Promise<string[][]> {
  const endpointsOf: string[][] = events.map(() => []);
  if (events.length === 0) return endpointsOf;
  const workspaces = [...new Set(events.map((e) => e.generation.workspaceId))];
  await holdSubscriptions(em, workspaces);
  const counted = await em.execute<Array<{ workspace_id: string; n: number | string }>>(
    `select e.workspace_id, count(*) as n from webhook_endpoints e
     where e.workspace_id in (select value from jsonb_array_elements_text(?::jsonb)) and ${SUBSCRIBED}
     group by e.workspace_id`,
    [JSON.stringify(workspaces)],
  );
  if (counted.length === 0) return endpointsOf;
  const counts = new Map(counted.map((c) => [c.workspace_id, Math.min(Number(c.n), MAX_ENDPOINTS_PER_WORKSPACE)]));
  const rows: EventDeliveryRows[] = [];
  for (const e of events) {
    const count = counts.get(e.generation.workspaceId) ?? 0;
    if (count === 0) continue;
    const createdAt = new Date(e.at);
    rows.push({
      generation_id: e.generation.id,
      workspace_id: e.generation.workspaceId,
      event_type: STARTED_EVENT,
      event_id: null,
      created_at: createdAt,
      trace_parent: e.traceParent,
      rest: JSON.stringify(startedEventBody(e.generation, createdAt)).slice(1),
      ids: Array.from({ length: count }, () => newId('dlv', e.at)),
    });
  }
  if (rows.length === 0) return endpointsOf;
  return insertDeliveries(em, events, rows);
}
