/**
 * The workspace's one queue timer, as pure decisions (decision.ts): armed for the earliest deadline of its
 * queued jobs, so a queued job needs no live actor of its own; when it fires, the jobs past their deadline expire.
 */
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { Decision, WorkspaceEffect } from './decision.ts';
import { expiringJob } from './jobs.ts';
import type { WorkspaceState } from './state.ts';

/**
 * Arms the queue timer: for `deadline` (a job just accepted or queued) if it is earlier than the one armed, or
 * else for the earliest deadline of the queued jobs (none: left as it is).
 */
export function armExpiry(state: WorkspaceState, effects: WorkspaceEffect[], deadline?: number): void {
  if (deadline !== undefined) {
    if (state.expiryAt !== undefined && state.expiryAt <= deadline) return;
  } else {
    for (const job of state.jobs.values()) {
      const d = job.status === 'queued' ? job.deadline : undefined;
      if (d !== undefined && (deadline === undefined || d < deadline)) deadline = d;
    }
    if (deadline === undefined) return;
  }
  state.expiryAt = deadline;
  effects.push({ type: 'arm_expiry', at: deadline });
}

/** A state just loaded: its timer armed for its queued jobs. */
export function decideLoaded<S extends WorkspaceState>(state: S): Decision<S, NoReply> {
  const effects: WorkspaceEffect[] = [];
  armExpiry(state, effects);
  return { state, reply: undefined, effects };
}

/**
 * `expire_queued`, the timer fired: queued jobs past their deadline are told to expire (each settles through
 * this actor, keeping its place until then), and the timer moves to the next deadline.
 */
export function decideExpireQueued<S extends WorkspaceState>(state: S, now: number): Decision<S, NoReply> {
  const effects: WorkspaceEffect[] = [{ type: 'cancel_expiry' }];
  state.expiryAt = undefined;
  for (const job of state.jobs.values()) {
    if (job.status !== 'queued' || job.deadline === undefined || job.deadline > now) continue;
    state.jobs.put(expiringJob(job));
    effects.push({ type: 'tell_generation', id: job.id, msg: { type: 'expire' } });
  }
  armExpiry(state, effects);
  return { state, reply: undefined, effects };
}
