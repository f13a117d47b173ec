import type { Actors } from './kinds.ts';
import { DirectoryStoppedError } from '../runtime/actor-directory.ts';
import type { RecoveryTask } from '../runtime/recovery.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Database } from '../persistence/database.ts';
import type { ShardScope } from '../persistence/cluster/shard-sql.ts';
import type { GenerationRow } from '../persistence/stores/generations/rows.ts';
import { jobsInFlightPage, queuedByWorkspace } from '../persistence/stores/generations/unfinished.ts';
import { jobContextOf, withJobContext, type JobContext } from '../runtime/tracing.ts';
import { readWorkspaces } from '../persistence/stores/workspace/load.ts';
import { openUnit } from '../persistence/stores/unit.ts';

/** Jobs in flight read per statement at recovery, and handed over to their provider together. */
const RECOVERY_PAGE = 1_000;
/** How long one job's hand-over may take before the next page goes anyway. */
const HAND_OVER_TIMEOUT_MS = 60_000;

/**
 * After a restart, every unfinished generation resumes: queued ones keep their original deadline and
 * wait for a slot; ones in flight at the crash are handed to their provider again (see the generation
 * actor's `recover`). Only unfinished jobs are read, through indexes that hold nothing else (migration
 * 0013), so the time this takes follows the work left, not the history.
 *
 * The workspaces of jobs in flight load first: loading takes back the plan's concurrency slots and the
 * providers' capacity those jobs hold, before any of them reaches a provider and before a queued job is
 * let start beside them. They are read together, a hundred per five statements (persistence/stores/workspace/load.ts),
 * and each actor is made from its record. Each job in flight gets its actor with its row, read here in
 * pages of a thousand (not one read per actor), and is handed over at once (resumeInPages). Queued jobs
 * need no actor of their own until they start: their workspace's actor loads them with their deadlines
 * (those already past expire at once) when it is told to schedule, after the service reports ready, so
 * thousands of queued jobs cost one id each.
 */
export function generationRecovery(db: Database, actors: Actors, clock: Clock, scope?: ShardScope): RecoveryTask {
  return {
    name: scope ? `generations of shard ${scope.shard}` : 'generations',
    async run() {
      const loaded = new Set<string>();
      const told = new Set<string>();
      const pages: GenerationRow[][] = [];
      // Each job is taken up again in the trace of the request that created it.
      const contexts = new Map<string, JobContext>();
      // Read in pages (keyset on the unfinished jobs' index), so no one result holds every job in flight.
      for (let after: { createdAt: Date; id: string } | undefined; ; ) {
        const page = await jobsInFlightPage(db, scope, after, RECOVERY_PAGE);
        // A time read back to the millisecond may bring a row of the last page again: each job is told once.
        const rows = page.map((job) => job.row).filter((row) => !told.has(row.id));
        for (const { row, traceContext } of page) {
          const job = jobContextOf(traceContext);
          if (job) contexts.set(row.id, job);
        }
        for (const row of rows) told.add(row.id);
        const fresh = [...new Set(rows.map((row) => row.workspaceId))].filter((workspaceId) => !loaded.has(workspaceId));
        for (const workspaceId of fresh) loaded.add(workspaceId);
        await loadWorkspaces(db, actors, clock, fresh);
        if (rows.length > 0) pages.push(rows);
        if (page.length < RECOVERY_PAGE || rows.length === 0) break;
        const last = rows[rows.length - 1]!;
        after = { createdAt: last.createdAt, id: last.id };
      }
      // The first page is handed over at once, each next one once the previous one has been: the hand-overs
      // go on right after the service reports ready instead of holding the database (and so readiness and
      // the first requests) behind thousands of writes. A shard's recovery (cluster mode) waits for all of
      // them, so a shard lost and gained again never has two recoveries telling the same job.
      const handOver = resumeInPages(actors, pages, contexts);
      if (scope) await handOver;
      const waiting = await queuedByWorkspace(db, scope);
      const workspaces = new Set(loaded);
      for (const { workspaceId } of waiting) workspaces.add(workspaceId);
      for (const workspaceId of workspaces) actors.tell('ws', workspaceId, { type: 'schedule' });
      return told.size + waiting.reduce((sum, row) => sum + row.queued, 0);
    },
  };
}

/** Workspaces read together per statement when a restart loads those of its jobs in flight. */
const WORKSPACES_PER_READ = 100;

/**
 * Loads the workspaces' actors from records read together, a hundred workspaces in five statements
 * (each actor would otherwise read its own with five): an actor already running keeps its state.
 */
async function loadWorkspaces(db: Database, actors: Actors, clock: Clock, workspaceIds: string[]): Promise<void> {
  for (let i = 0; i < workspaceIds.length; i += WORKSPACES_PER_READ) {
    const records = await readWorkspaces(openUnit(db), workspaceIds.slice(i, i + WORKSPACES_PER_READ), clock.now());
    await Promise.all([...records.values()].map((record) => actors.ask('ws', record.workspaceId, { type: 'preloaded', record })));
  }
}

/** Hand-overs in flight at most: each is an actor made, a write and a provider call. */
const HAND_OVER_WINDOW = 1_000;
/**
 * Hand-overs started together. Between two slices the event loop takes its turn, so requests that arrive
 * right after ready (a create, a readiness probe) are answered between hand-overs, not after a thousand of
 * them (PGlite runs its statements on this thread), while a thousand stay in flight, so the jobs resume
 * within about a second (slices waited for one after the other resumed a tenth as many in that second on
 * PostgreSQL).
 */
const HAND_OVER_SLICE = 100;

/** Tells each job of each page to recover, at most HAND_OVER_WINDOW at a time, started a slice at a time. */
async function resumeInPages(actors: Actors, pages: GenerationRow[][], contexts: Map<string, JobContext>): Promise<void> {
  const inFlight = new Set<Promise<unknown>>();
  let stopped = false;
  const handOver = (row: GenerationRow) => {
    const told = withJobContext(contexts.get(row.id), () => actors.ask('gen', row.id, { type: 'recover', row }, HAND_OVER_TIMEOUT_MS))
      // The actor system has stopped (the service is stopping): what is left is recovered by the next start.
      .catch((error: unknown) => {
        if (error instanceof DirectoryStoppedError) stopped = true;
      })
      .finally(() => inFlight.delete(told));
    inFlight.add(told);
  };
  for (const page of pages) {
    for (let i = 0; i < page.length; i += HAND_OVER_SLICE) {
      while (inFlight.size >= HAND_OVER_WINDOW) await Promise.race(inFlight);
      if (stopped) return;
      for (const row of page.slice(i, i + HAND_OVER_SLICE)) handOver(row);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  await Promise.all(inFlight);
}
