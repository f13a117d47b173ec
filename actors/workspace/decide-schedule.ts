/**
 * Which of a workspace's jobs start, as pure decisions (decision.ts): the queued ones, oldest first, as the
 * plan's concurrency and their providers' slots allow, and the ones recovered during a pause once it is lifted.
 */
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { Decision, SlotPort, WorkspaceEffect, WorkspaceFacts } from './decision.ts';
import { declinedJob, grantedJob, heldJob, letGoJob } from './jobs.ts';
import type { WorkspaceState } from './state.ts';

/**
 * Starts queued jobs, oldest first, while the plan's concurrency allows and generation is neither paused nor
 * handed over. A job whose provider is at its capacity stays queued (jobs of other providers behind it may
 * start); the provider's capacity grants this workspace a slot in fair order and tells it to schedule again.
 * Jobs recovered during a pause (which already hold their slot and capacity) are let go first. Pushes its
 * effects (the messages to the jobs let go) to `effects`.
 */
export function schedule(state: WorkspaceState, facts: WorkspaceFacts, slots: SlotPort, effects: WorkspaceEffect[]): void {
  if (facts.paused || facts.handingOver) return;
  const { jobs, plan } = state;
  if (jobs.count('held') > 0) {
    for (const job of jobs.values()) {
      if (job.status !== 'held') continue;
      jobs.put(letGoJob(job));
      effects.push({ type: 'tell_generation', id: job.id, msg: { type: 'recover' } });
    }
  }
  if (jobs.holdingSlots >= plan.concurrentJobs || jobs.count('queued') === 0) return;
  // Oldest first; a job whose provider is at its capacity keeps its place, and those behind it may start.
  let unseen = jobs.count('queued');
  for (const job of jobs.values()) {
    if (jobs.holdingSlots >= plan.concurrentJobs || unseen === 0) break;
    if (job.status !== 'queued') continue;
    unseen--;
    if (!slots.tryAcquire(job.slotKey, job.id, state.workspaceId, plan.fairShareWeight)) continue;
    jobs.put(grantedJob(job));
    effects.push({ type: 'start_generation', id: job.id, msg: { type: 'reserve', row: job.row }, trace: job.trace });
  }
}

/** `schedule`: a slot may have freed (a provider's grant, a lifted stop, a batch committed). */
export function decideSchedule<S extends WorkspaceState>(state: S, facts: WorkspaceFacts, slots: SlotPort): Decision<S, NoReply> {
  state.plan = facts.plan;
  const effects: WorkspaceEffect[] = [];
  schedule(state, facts, slots, effects);
  return { state, reply: undefined, effects };
}

/** `slot_declined`: a job gave back the slot it was granted (it had ended, or its shard is being handed over). */
export function decideSlotDeclined<S extends WorkspaceState>(state: S, generationId: string, facts: WorkspaceFacts, slots: SlotPort): Decision<S, NoReply> {
  state.jobs.update(generationId, declinedJob);
  slots.release(generationId);
  return decideSchedule(state, facts, slots);
}

/** `hold_recovered`: a job in flight at a restart waits, with its slot, for the emergency stop to be lifted. */
export function decideHoldRecovered<S extends WorkspaceState>(state: S, generationId: string, facts: WorkspaceFacts, slots: SlotPort): Decision<S, NoReply> {
  state.jobs.update(generationId, heldJob);
  // The stop may have been lifted since the job looked: then it goes on at once.
  return decideSchedule(state, facts, slots);
}
