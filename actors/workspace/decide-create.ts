/**
 * A workspace's creates, as pure decisions (decision.ts): refused, replayed, or accepted (credits reserved in
 * memory, the row handed to the group commit as an effect, answered once it is durable), and what its commit
 * or failure changes.
 */
import { reserveWithinCap, spendAt, spendChange } from '../../domain/account.ts';
import { chargeKey, refuseByKey, walletCapOf, type KeyJob, type KeySpend } from '../../domain/key-limits.ts';
import { QUEUE_FACTOR } from '../../domain/plans.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { JobContext } from '../../runtime/tracing.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { decide as decideGeneration } from '../generation/machine.ts';
import type { Creation } from './creations.ts';
import type { Decision, FollowUp, SlotPort, WorkspaceEffect, WorkspaceFacts } from './decision.ts';
import { armExpiry } from './decide-expiry.ts';
import { rememberKeys } from './decide-keys.ts';
import { rechargeIfLow } from './decide-recharge.ts';
import { schedule } from './decide-schedule.ts';
import type { IdempotencyEntry } from './idempotency-cache.ts';
import { acceptedJob, committedJob } from './jobs.ts';
import type { PricedOrder } from './pricing.ts';
import type { CreateReply, WorkspaceCommitMessage } from './protocol.ts';
import type { WorkspaceState } from './state.ts';

/** How long an Idempotency-Key answers its first request again. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** One create as the actor hands it over: the message's order priced (pricing.ts) and its key, with what the actor made for it. */
export interface CreateRequest {
  /** The order with its price and deployment from the catalog served now, or why that catalog cannot take it. */
  priced: PricedOrder;
  idempotency?: { key: string; hash: string };
  /** The job's id, should it be accepted: the order's own, or one the actor made. */
  id: string;
  /** Whose provider slots it takes (ActorDeps.slotKeyOf of its provider and deployment); '' when it was not priced. */
  slotKey: string;
  /** The creating request's trace context and id (runtime/tracing.ts), kept with the job; null with tracing off. */
  trace: JobContext | null;
}

/** What the actor read from the database for creates before deciding them. */
export interface CreateLookups {
  /** The stored Idempotency-Keys among those of the creates that memory did not hold. */
  stored?: ReadonlyMap<string, IdempotencyEntry>;
  /** The limits and spend of the creates' keys the actor had not seen yet. */
  keys?: ReadonlyMap<string, KeySpend>;
}

export interface CreateFacts extends WorkspaceFacts {
  /** Queued jobs expire after this long (QUEUE_TIMEOUT_MS). */
  queueTimeoutMs: number;
}

type Refusal = Extract<CreateReply, { kind: 'refused' }>;
const refuse = (code: Refusal['code'], message: string): CreateReply => ({ kind: 'refused', code, message });
const KEY_BODY_CONFLICT = 'This Idempotency-Key was already used with a different request body.';

/** `create`: one create, scheduling once its row is durable. */
export function decideCreate<S extends WorkspaceState>(
  state: S,
  request: CreateRequest,
  lookups: CreateLookups,
  facts: CreateFacts,
  slots: SlotPort,
  now: number,
): Decision<S, CreateReply> {
  state.plan = facts.plan;
  remember(state, lookups, now);
  const effects: WorkspaceEffect[] = [];
  const seen = request.idempotency && state.idempotency.get(request.idempotency.key, now);
  const reply = admit(state, request, seen, facts, slots, now, true, effects);
  return { state, reply, effects };
}

/**
 * `create_batch`: the creates of a batch, in order, as the same number of `create` messages would make them,
 * but every row to the same group commit and one schedule once all of them ended. An item whose key an earlier
 * item of the batch took is that item's answer again (replayed) if it is the same request, and a conflict if it
 * is not. The answer waits for every item's write, not the first that failed: the actor reloads after a failed
 * write only once its writes in flight are done, and a reload read while later items were still committing would
 * leave those jobs out of its memory.
 */
export function decideCreateBatch<S extends WorkspaceState>(
  state: S,
  requests: readonly CreateRequest[],
  lookups: CreateLookups,
  facts: CreateFacts,
  slots: SlotPort,
  now: number,
): Decision<S, CreateReply[]> {
  state.plan = facts.plan;
  remember(state, lookups, now);
  const effects: WorkspaceEffect[] = [];
  const replies: CreateReply[] = [];
  const takenHere = new Map<string, { hash: string; reply: CreateReply }>();
  for (const request of requests) {
    const { idempotency } = request;
    const earlier = idempotency && takenHere.get(idempotency.key);
    if (idempotency && earlier) {
      replies.push(earlier.hash !== idempotency.hash ? refuse('conflict', KEY_BODY_CONFLICT) : asReplay(earlier.reply));
      continue;
    }
    const seen = idempotency && state.idempotency.get(idempotency.key, now);
    const reply = admit(state, request, seen, facts, slots, now, false, effects);
    if (idempotency && reply.kind !== 'refused') takenHere.set(idempotency.key, { hash: idempotency.hash, reply });
    replies.push(reply);
  }
  // One schedule for the whole batch, not one per item; also when an item failed (the actor then reloads its
  // state before that message, and the items that did commit start from there).
  const wrote = effects.some((effect) => effect.type === 'write_creation');
  return { state, reply: replies, effects, ...(wrote ? { afterWrites: [{ type: 'tell_self', msg: { type: 'schedule' } }] } : {}) };
}

/** A first answer given again to a later item with the same key and request. */
function asReplay(reply: CreateReply): CreateReply {
  return reply.kind === 'created' ? { kind: 'replay', status: 201, generation: reply.generation } : reply;
}

/** What the actor read joins its memory: stored Idempotency-Keys it did not hold, keys it had not seen. */
function remember(state: WorkspaceState, lookups: CreateLookups, now: number): void {
  if (lookups.stored) for (const [key, entry] of lookups.stored) if (!state.idempotency.get(key, now)) state.idempotency.remember(key, entry);
  rememberKeys(state, lookups.keys);
}

/**
 * Decides one create against the workspace's state: refused or replayed at once, or accepted (credits reserved
 * in memory, its row's write pushed to `effects`), answered once the row is durable. `seen` is the
 * Idempotency-Key's entry. Once the row commits, the actor tells itself `create_committed`;
 * `scheduleWhenDurable`: it then schedules (a batch tells it once for all its rows).
 */
function admit(
  state: WorkspaceState,
  request: CreateRequest,
  seen: IdempotencyEntry | undefined,
  facts: CreateFacts,
  slots: SlotPort,
  now: number,
  scheduleWhenDurable: boolean,
  effects: WorkspaceEffect[],
): CreateReply {
  const { priced, idempotency } = request;
  if (seen) {
    if (seen.hash !== idempotency!.hash) return refuse('conflict', KEY_BODY_CONFLICT);
    if (!seen.result) return refuse('conflict', 'A request with this Idempotency-Key is still being processed.');
    return { kind: 'replay', status: seen.result.status, generation: seen.result.generation };
  }
  // After the replay: a key's first answer is given again even when a reload has since taken its model away.
  if (!priced.ok) return refuse('validation_error', priced.message);
  const { draft } = priced;
  const { plan, jobs } = state;
  if (!draft.modelPlans.includes(plan.id)) return refuse('plan_limit_reached', `Model ${draft.modelId} is not available on the ${plan.name} plan.`);
  const limit = plan.concurrentJobs * QUEUE_FACTOR;
  // Jobs reserved at their creation hold their slot already: the ones still being created to queue count apart.
  if (jobs.holdingSlots + jobs.count('queued') + jobs.count('creating') >= limit) {
    return refuse('plan_limit_reached', `The ${plan.name} plan allows ${limit} unfinished jobs at a time (${plan.concurrentJobs} running).`);
  }

  const key = draft.apiKeyId === null ? undefined : state.keys.get(draft.apiKeyId);
  const byKey = key && refuseByKey(key, draft.modelId, draft.credits, now);
  if (byKey) return refuse(byKey.code, byKey.message);

  const { id } = request;
  const spend = spendAt(state.spend, now);
  const money = reserveWithinCap(
    state.account,
    id,
    draft.credits,
    draft.paymentMode,
    plan.centsPerCredit,
    state.wallet.monthlySpendCapCents,
    spend,
    key && walletCapOf(key, now),
  );
  if (!money.ok) return refuse(money.code, money.message);
  const at = new Date(now);
  const deadline = now + facts.queueTimeoutMs;
  const generation: GenerationRow = {
    id,
    workspaceId: draft.workspaceId,
    apiKeyId: draft.apiKeyId,
    userId: draft.userId,
    mode: draft.mode,
    modelId: draft.modelId,
    status: 'queued',
    params: draft.params,
    inputs: draft.inputs,
    paymentMode: draft.paymentMode,
    credits: draft.credits,
    project: draft.project,
    idempotencyKey: idempotency?.key ?? null,
    provider: draft.provider,
    deploymentId: draft.deploymentId,
    tokenTerms: draft.tokenTerms,
    usage: null,
    providerJobId: null,
    attempts: 0,
    textOutput: null,
    outputAssetIds: [],
    errorCode: null,
    errorMessage: null,
    timeline: [{ status: 'queued', at: at.toISOString() }],
    queueDeadline: new Date(deadline),
    createdAt: at,
    updatedAt: at,
    startedAt: null,
    completedAt: null,
  };
  const entries = money.entries;
  state.account = money.account;
  let keySpend: ReturnType<typeof chargeKey>['deltas'] = [];
  let keyJob: KeyJob | undefined;
  if (key) {
    const fromWallet = entries.reduce((sum, e) => sum + e.reservedWalletCents, 0);
    const charged = chargeKey(key, draft.apiKeyId!, state.workspaceId, draft.credits, fromWallet, now);
    keyJob = charged.job;
    keySpend = charged.deltas;
  }
  state.spend = { month: spend.month, spentCents: spend.spentCents + spendChange(entries) };
  rechargeIfLow(state, effects);
  const keyExpiresAt = now + IDEMPOTENCY_TTL_MS;
  if (idempotency) state.idempotency.begin(idempotency.key, idempotency.hash, keyExpiresAt);

  // Kept with the job: it starts (perhaps after a restart) in the trace of the request that made it.
  const traceContext = request.trace;
  const creation: Creation = {
    generation,
    traceContext,
    money: { workspaceId: state.workspaceId, entries, at },
    keySpend,
    idempotency: idempotency && { key: idempotency.key, hash: idempotency.hash, expiresAt: new Date(keyExpiresAt) },
  };
  const { slotKey } = request;
  const tookSlot = takesSlotAtCreation(state, id, slotKey, facts, slots);
  jobs.put(
    acceptedJob({ id, slotKey, deadline, row: generation, ...(traceContext ? { trace: traceContext } : {}), ...(keyJob ? { key: keyJob } : {}) }, tookSlot),
  );
  // Once committed, the answer as its Idempotency-Key keeps it: the job as created, queued.
  const remembered = idempotency && { key: idempotency.key, entry: { hash: idempotency.hash, expiresAt: keyExpiresAt, result: { status: 201, generation } } };
  if (tookSlot) return createReserved(state, creation, remembered, effects);
  // Its deadline is watched from now (the timer fires only for queued jobs: one still being created is
  // watched again once committed), so a caller answered the job was created finds its expiry set.
  armExpiry(state, effects, deadline);
  effects.push({
    type: 'write_creation',
    creation,
    lane: 'creations',
    onCommitted: [
      { type: 'tell_self', msg: { type: 'create_committed', generationId: id, idempotency: remembered, schedule: scheduleWhenDurable } },
      // The creation committed: the live streams see the job queued.
      { type: 'publish', row: generation },
      { type: 'count_transition', from: 'new', to: 'queued' },
    ],
  });
  return { kind: 'created', generation };
}

/**
 * Whether a new job takes a slot at once, reserved in its creation's transaction: the plan has a free slot,
 * no job waits for one (queued, being created to queue, or recovered during a pause), generation runs, the
 * shard stays here, and the job's provider has room (acquired here, only a free slot nobody waits for:
 * otherwise the job queues and asks in its turn, docs/generations.md, Fair shares). Saves the job a commit of
 * its own before its provider is called.
 */
function takesSlotAtCreation(state: WorkspaceState, id: string, slotKey: string, facts: WorkspaceFacts, slots: SlotPort): boolean {
  const { jobs, plan } = state;
  if (jobs.holdingSlots >= plan.concurrentJobs || jobs.count('queued') > 0 || jobs.count('creating') > 0 || jobs.count('held') > 0) return false;
  if (facts.paused || facts.handingOver) return false;
  return slots.acquireIfFree(slotKey, id, state.workspaceId, plan.fairShareWeight);
}

/**
 * A create whose job holds its slot from the start: its row is written reserved (its first attempt counted,
 * its timeline queued then reserved), and its actor is told `start` once committed. The answer is the job as
 * created, queued, its first state (docs/generations.md, States). The slot it takes may be one that a
 * settlement not yet committed freed: its creation is then written behind the workspace's last settlement, so
 * that no crash can leave the new job reserved and the old one still running. Otherwise (the workspace within
 * its plan even counting those slots as taken) it goes with the other creates.
 */
function createReserved(
  state: WorkspaceState,
  creation: Creation,
  remembered: Extract<WorkspaceCommitMessage, { type: 'create_committed' }>['idempotency'],
  effects: WorkspaceEffect[],
): CreateReply {
  const queued = creation.generation;
  const reserved = decideGeneration(queued, { type: 'reserve' }, queued.createdAt.getTime());
  if (!reserved.ok) throw new Error(`a new job could not be reserved: ${reserved.message}`);
  // Its effects (the hand-over) are its generation actor's, told `start` once this commits.
  const row = reserved.state;
  const { jobs, plan } = state;
  // The new job holds its slot already; slots freed by settlements not yet committed count as taken.
  const lane = jobs.holdingSlots + jobs.count('settling') <= plan.concurrentJobs ? 'creations' : 'behind_last_settlement';
  const onCommitted: FollowUp[] = [
    // Told before the job's own actor, whose settlement of it then comes after.
    { type: 'tell_self', msg: { type: 'create_committed', generationId: row.id, idempotency: remembered, schedule: false } },
    { type: 'publish', row: queued },
    { type: 'count_transition', from: 'new', to: 'queued' },
    { type: 'start_generation', id: row.id, msg: { type: 'start', row }, trace: creation.traceContext ?? undefined },
  ];
  effects.push({
    type: 'write_creation',
    creation: { ...creation, generation: row, answer: queued },
    lane,
    onCommitted,
    // The slot it held is free again (the actor reloads its state from the database before that message).
    onFailed: [{ type: 'tell_self', msg: { type: 'create_failed', generationId: row.id } }],
  });
  return { kind: 'created', generation: queued };
}

/**
 * `create_committed`: a create's row committed. The job joins the queue (its deadline watched) or, reserved at
 * creation, is active; its Idempotency-Key answers it from now on. A job the actor no longer has as being
 * created (its state was reloaded since, from a database that has the row) is left as it is.
 */
export function decideCreateCommitted<S extends WorkspaceState>(
  state: S,
  msg: Extract<WorkspaceCommitMessage, { type: 'create_committed' }>,
  facts: WorkspaceFacts,
  slots: SlotPort,
): Decision<S, NoReply> {
  state.plan = facts.plan;
  const effects: WorkspaceEffect[] = [];
  const job = state.jobs.get(msg.generationId);
  if (job && (job.status === 'creating' || job.status === 'starting')) {
    const committed = committedJob(job);
    state.jobs.put(committed);
    if (committed.deadline !== undefined) armExpiry(state, effects, committed.deadline);
    if (msg.idempotency) state.idempotency.remember(msg.idempotency.key, msg.idempotency.entry);
  }
  effects.push({ type: 'money_moved' });
  if (msg.schedule) schedule(state, facts, slots, effects);
  return { state, reply: undefined, effects };
}

/**
 * `create_failed`: the row of a job reserved at creation failed. The state was reloaded after the failed write
 * (the job is not in it); should it not have been, the job's slot is freed here. The provider's slot goes back,
 * and the workspace's to the queue.
 */
export function decideCreateFailed<S extends WorkspaceState>(state: S, generationId: string, facts: WorkspaceFacts, slots: SlotPort): Decision<S, NoReply> {
  state.plan = facts.plan;
  if (state.jobs.get(generationId)?.status === 'starting') state.jobs.delete(generationId);
  slots.release(generationId);
  const effects: WorkspaceEffect[] = [];
  schedule(state, facts, slots, effects);
  return { state, reply: undefined, effects };
}
