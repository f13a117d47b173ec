import type { Actors } from '../kinds.ts';
import type { Database } from '../../persistence/database.ts';
import { workspacesWithQueued } from '../../persistence/stores/generations/unfinished.ts';

/**
 * When the emergency stop is released, queued jobs start again at once, without waiting for a new
 * request: every workspace actor that may hold queued jobs is told to schedule. That is each live
 * workspace actor, and each workspace with a queued generation in the database (its actor is then
 * spawned and loads its queue).
 */
export async function nudgeQueuedWorkspaces(
  db: Database,
  actors: Actors & { liveIds(kind: string): string[] },
  /** Cluster mode: only the workspaces this node runs. */
  runsHere: (workspaceId: string) => boolean = () => true,
): Promise<number> {
  const queued = await workspacesWithQueued(db);
  const workspaces = new Set([...actors.liveIds('ws'), ...queued].filter(runsHere));
  for (const workspaceId of workspaces) actors.tell('ws', workspaceId, { type: 'schedule' });
  return workspaces.size;
}
