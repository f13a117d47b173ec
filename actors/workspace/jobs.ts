import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import type { JobContext } from '../../runtime/tracing.ts';
import type { KeyJob } from '../../domain/key-limits.ts';

/**
 * Where an unfinished job stands for its workspace:
 * - `creating`: accepted, its row not yet committed; it queues once it is;
 * - `starting`: accepted with a slot of its own (reserved in its creation's transaction), its row not yet committed;
 * - `queued`: committed, waiting for a slot;
 * - `active`: holds one of the plan's slots;
 * - `held`: active, recovered after a restart while generation was paused: not yet handed to its provider again;
 * - `declined`: gave back the slot it was granted (it had ended, or its shard is being handed over); it waits for its settlement;
 * - `settling`: settled in memory, its slot freed, its settlement not yet committed.
 */
export type WorkspaceJobStatus = 'creating' | 'starting' | 'queued' | 'active' | 'held' | 'declined' | 'settling';

/** What the workspace knows of one of its unfinished jobs. */
export interface WorkspaceJob {
  readonly id: string;
  readonly status: WorkspaceJobStatus;
  /** Whose slots it takes: its deployment's or its provider kind's (ActorDeps.slotKeyOf). */
  readonly slotKey: string;
  /**
   * Its queue deadline (ms), while it waits and has been neither granted a slot nor told to expire. The
   * workspace keeps one timer for the earliest, so a queued job needs no live actor of its own.
   */
  readonly deadline?: number;
  /**
   * The row of a job this actor created, kept while it waits and handed to its generation actor when it
   * starts, so that actor need not read it back. Jobs queued before a restart have none.
   */
  readonly row?: GenerationRow;
  /** The trace context and request id of its creating request: it starts in that trace, not in the one of whatever freed its slot. */
  readonly trace?: JobContext;
  /** What it counted against its API key, to give back when it settles. */
  readonly key?: KeyJob;
}

/** A job just accepted: `starting` when it took a slot at once, `creating` when it will queue. */
export function acceptedJob(job: Omit<WorkspaceJob, 'status'>, tookSlot: boolean): WorkspaceJob {
  if (tookSlot) return { id: job.id, status: 'starting', slotKey: job.slotKey, ...(job.key ? { key: job.key } : {}) };
  return { ...job, status: 'creating' };
}

/** Its creation committed: a `creating` job queues, a `starting` one is active. Any other job (loaded since, or settled) is left as it is. */
export function committedJob(job: WorkspaceJob): WorkspaceJob {
  if (job.status === 'creating') return { ...job, status: 'queued' };
  if (job.status === 'starting') return { ...job, status: 'active' };
  return job;
}

/** A queued job granted a slot: active, its deadline, row and trace handed on. */
export function grantedJob(job: WorkspaceJob): WorkspaceJob {
  return { id: job.id, status: 'active', slotKey: job.slotKey, ...(job.key ? { key: job.key } : {}) };
}

/** A queued job told to expire: it keeps its place until it settles, but its deadline is not watched any more. */
export function expiringJob(job: WorkspaceJob): WorkspaceJob {
  const { deadline: _deadline, ...rest } = job;
  return rest;
}

/** An active job recovered while generation is paused waits, held, with its slot. */
export function heldJob(job: WorkspaceJob): WorkspaceJob {
  return job.status === 'active' ? { ...job, status: 'held' } : job;
}

/** A held job let go once the stop is lifted: active, told to recover again. */
export function letGoJob(job: WorkspaceJob): WorkspaceJob {
  return job.status === 'held' ? { ...job, status: 'active' } : job;
}

/** The job gave back the slot it held: it holds neither a slot nor a place in the queue, only what its key counted. */
export function declinedJob(job: WorkspaceJob): WorkspaceJob {
  if (!holdsSlot(job)) return job;
  return { id: job.id, status: 'declined', slotKey: job.slotKey, ...(job.key ? { key: job.key } : {}) };
}

/**
 * The job settled in memory. One that held a slot stays, `settling`, until its settlement commits (a job
 * reserved at creation meanwhile may take that slot only behind it); any other leaves at once (undefined).
 */
export function settledJob(job: WorkspaceJob): WorkspaceJob | undefined {
  // Settled twice: the second settlement's write fails (the row is no longer unfinished), the first's entry stays.
  if (job.status === 'settling') return job;
  return holdsSlot(job) ? { id: job.id, status: 'settling', slotKey: job.slotKey } : undefined;
}

/** Whether the job holds one of the plan's slots. */
export function holdsSlot(job: WorkspaceJob): boolean {
  return job.status === 'active' || job.status === 'starting' || job.status === 'held';
}

/** A job loaded from its row: queued, or active for any status past queued. */
export function loadedJob(row: { id: string; status: string; slotKey: string; queueDeadline: number; trace?: JobContext; key?: KeyJob }): WorkspaceJob {
  const { id, slotKey, trace, key } = row;
  const found = { id, slotKey, ...(key ? { key } : {}) };
  return row.status === 'queued' ? { ...found, status: 'queued', deadline: row.queueDeadline, ...(trace ? { trace } : {}) } : { ...found, status: 'active' };
}

/**
 * The workspace's unfinished jobs, one entry each, in the order they were accepted (the queue's order,
 * oldest first), with how many are in each status so that admission and scheduling count in O(1).
 */
export class WorkspaceJobs {
  private readonly byId = new Map<string, WorkspaceJob>();
  private readonly counts: Record<WorkspaceJobStatus, number> = { creating: 0, starting: 0, queued: 0, active: 0, held: 0, declined: 0, settling: 0 };

  get(id: string): WorkspaceJob | undefined {
    return this.byId.get(id);
  }

  /** Adds the job, or puts this record of it in place of the last (its place in the order kept). */
  put(job: WorkspaceJob): void {
    const before = this.byId.get(job.id);
    if (before) this.counts[before.status]--;
    this.counts[job.status]++;
    this.byId.set(job.id, job);
  }

  /** Puts `change` of the job's record in its place, if the workspace has the job. */
  update(id: string, change: (job: WorkspaceJob) => WorkspaceJob): void {
    const job = this.byId.get(id);
    if (job) this.put(change(job));
  }

  /** The job leaves the workspace; its last record, if it had one. */
  delete(id: string): WorkspaceJob | undefined {
    const job = this.byId.get(id);
    if (!job) return undefined;
    this.counts[job.status]--;
    this.byId.delete(id);
    return job;
  }

  /** Every job, oldest first. */
  values(): IterableIterator<WorkspaceJob> {
    return this.byId.values();
  }

  count(status: WorkspaceJobStatus): number {
    return this.counts[status];
  }

  /** Jobs that hold one of the plan's slots (reserved at creation, active, or held during a pause). */
  get holdingSlots(): number {
    return this.counts.active + this.counts.starting + this.counts.held;
  }

  /** Jobs whose creation is not yet committed. */
  get uncommitted(): number {
    return this.counts.creating + this.counts.starting;
  }
}
