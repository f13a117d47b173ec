import type { Transaction } from '../../persistence/stores/transaction.ts';
import { countStartedSubscribers, holdSubscriptions } from '../../persistence/stores/webhooks/endpoints.ts';
import type { EventDeliveryRows } from '../../persistence/stores/webhooks/deliveries.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { newId } from '../../persistence/ids.ts';
import { insertDeliveries, MAX_ENDPOINTS_PER_WORKSPACE } from './enqueue.ts';

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

/**
 * The deliveries of many jobs' moves to running, written inside the transaction that commits those moves
 * (as the terminal events' are with theirs), for jobs whose workspace has an endpoint that asked for the
 * event (STARTED_WANTED, persistence/stores/webhooks/endpoints.ts): the workspaces' rows are held (holdSubscriptions, so an endpoint created
 * meanwhile is either counted and sent the event, or created after this commits), their subscribed
 * endpoints counted, then one INSERT … SELECT. The ids are made now, after any earlier event of these
 * jobs, so each endpoint gets a job's `generation.started` before its terminal event. Returns, per event
 * (same order), the endpoints that got one.
 */
export async function writeStartedDeliveries(em: Transaction, events: StartedEvent[]): Promise<string[][]> {
  const endpointsOf: string[][] = events.map(() => []);
  if (events.length === 0) return endpointsOf;
  const workspaces = [...new Set(events.map((e) => e.generation.workspaceId))];
  await holdSubscriptions(em, workspaces);
  const counted = await countStartedSubscribers(em, workspaces);
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
