import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { ActorContext, KindBehavior } from '../kinds.ts';
import type { PlanEntitlements } from '../../domain/plans.ts';
import { newId } from '../../persistence/ids.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { readIdempotencyKeys } from '../../persistence/stores/workspace/idempotency.ts';
import { writeKeyLimits } from '../../persistence/stores/workspace/keys.ts';
import { readWorkspaces, type WorkspaceRecord } from '../../persistence/stores/workspace/load.ts';
import { depsOf } from '../deps.ts';
import { capture, capturePart, emptyAccount, grant, release, reserveWithinCap, spendAt, spendChange } from '../../domain/account.ts';
import { exactNano, tokenCharge } from '../../domain/catalog/pricing.ts';
import type { WorkspaceState } from './state.ts';
import { acceptedJob, committedJob, declinedJob, expiringJob, grantedJob, heldJob, holdsSlot, letGoJob, settledJob } from './jobs.ts';
import type { IdempotencyEntry } from './idempotency-cache.ts';
import { writeOpeningAccount } from '../../persistence/stores/workspace/money.ts';
import { creationsOf, reservedCreationsOf, type Creation } from './creations.ts';
import { decide } from '../generation/machine.ts';
import { pendingProgressOf, writeProgressOf } from '../generation/progress-writes.ts';
import { chargeKey, keyLimitsUsage, patchKeyLimits, refuseByKey, settleKey, walletCapOf, type KeyJob, type KeyLimitsPatch } from '../../domain/key-limits.ts';
import { loadKeySpends, workspaceStateOf } from './load.ts';
import { writeSettlement, type Settlement } from './settlements.ts';
import type { Balances, CreateItem, CreateReply, SettleReply, GenerationDraft, KeyLimitsReply, KeyUsageReply, WorkspaceMessage } from './protocol.ts';
import {
  applyPaymentEvent,
  autoRecharge,
  cancelSubscription,
  maybeAutoRecharge,
  rechargeCharged,
  renewalCharged,
  renewSubscription,
  updateWalletSettings,
  walletSnapshot,
} from './payments.ts';
import { captureJobContext, withJobContext } from '../../runtime/tracing.ts';

/** A workspace may hold this many times its plan's concurrency in jobs not yet finished (queued or active). */
export const QUEUE_FACTOR = 10;
const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * The single writer of a workspace's credits and wallet, and its job scheduler: reserves at creation,
 * captures or releases at the end in the same transaction as the generation's terminal state, and lets
 * queued jobs start as the plan's concurrency allows.
 */
export const workspaceActor: KindBehavior<'ws', WorkspaceState> = {
  kind: 'ws',

  async load(ctx) {
    let record = (await readWorkspaces(openUnit(ctx.db), [ctx.id], ctx.clock.now())).get(ctx.id)!;
    if (!record.account && record.exists) {
      const plans = depsOf(ctx).catalog;
      await openAccount(ctx, plans.plan(record.plan ?? plans.defaultPlan().id));
      record = (await readWorkspaces(openUnit(ctx.db), [ctx.id], ctx.clock.now())).get(ctx.id)!;
    }
    return loaded(record, ctx);
  },

  // A restart reads the workspaces of its jobs in flight together (recovery) and hands each its record.
  seed: (msg, ctx) => (msg.type === 'preloaded' && (msg.record.account || !msg.record.exists) ? loaded(msg.record, ctx) : undefined),

  // Every message sees the workspace's plan as the catalog serves it now (a reload may have changed its limits).
  handlers: withCurrentPlan({
    create: (state, msg, ctx) => create(state, msg.draft, msg.idempotency, ctx),
    create_batch: (state, msg, ctx) => createBatch(state, msg.items, ctx),
    settle: (state, msg, ctx) => settle(state, msg, ctx),
    slot_declined: (state, msg, ctx) => {
      state.jobs.update(msg.generationId, declinedJob);
      depsOf(ctx).capacity.release(msg.generationId);
      schedule(state, ctx);
      return { state };
    },
    schedule: (state, _msg, ctx) => {
      schedule(state, ctx);
      return { state };
    },
    hold_recovered: (state, msg, ctx) => {
      state.jobs.update(msg.generationId, heldJob);
      // The stop may have been lifted since the job looked: then it goes on at once.
      schedule(state, ctx);
      return { state };
    },
    create_committed: (state, msg, ctx) => {
      createCommitted(state, msg, ctx);
      return { state };
    },
    create_failed: (state, msg, ctx) => {
      // The state was reloaded after the failed write (the job is not in it); should it not have been, the job's slot is freed here.
      if (state.jobs.get(msg.generationId)?.status === 'starting') state.jobs.delete(msg.generationId);
      depsOf(ctx).capacity.release(msg.generationId);
      schedule(state, ctx);
      return { state };
    },
    settle_committed: (state, msg) => {
      if (state.jobs.get(msg.generationId)?.status === 'settling') state.jobs.delete(msg.generationId);
      return { state };
    },
    expire_queued: (state, _msg, ctx) => {
      expireQueued(state, ctx);
      return { state };
    },
    preloaded: (state) => ({ state, reply: balancesOf(state) }),
    balances: (state) => ({ state, reply: balancesOf(state) }),
    payment_event: (state, msg, ctx) => applyPaymentEvent(state, msg.provider, msg.event, ctx),
    renew: (state, msg, ctx) => renewSubscription(state, msg.subscriptionId, ctx),
    cancel_subscription: (state, _msg, ctx) => cancelSubscription(state, ctx),
    wallet: (state, _msg, ctx) => walletSnapshot(state, ctx),
    wallet_settings: (state, msg, ctx) => updateWalletSettings(state, msg.patch, ctx),
    auto_recharge: (state, _msg, ctx) => autoRecharge(state, ctx),
    recharge_charged: (state, msg, ctx) => rechargeCharged(state, msg.charge, msg.result, ctx),
    renewal_charged: (state, msg, ctx) => renewalCharged(state, msg.charge, msg.result, msg.error, ctx),
    key_limits: (state, msg, ctx) => changeKeyLimits(state, msg.keyId, msg.patch, ctx),
    key_usage: async (state, msg, ctx) => {
      await ensureKeys(state, [msg.keyId], ctx);
      const key = state.keys.get(msg.keyId);
      const reply: KeyUsageReply = key ? { found: true, usage: keyLimitsUsage(key, ctx.clock.now()) } : { found: false };
      return { state, reply };
    },
  }),

  keepAlive: (state) => state.jobs.count('queued') > 0 || state.jobs.holdingSlots > 0 || state.jobs.uncommitted > 0,
};

/** The table with each handler seeing the workspace's plan as the catalog serves it now, refreshed once before the message. */
function withCurrentPlan<H extends Record<string, (state: WorkspaceState, msg: never, ctx: ActorContext) => unknown>>(table: H): H {
  const wrapped: Record<string, (state: WorkspaceState, msg: never, ctx: ActorContext) => unknown> = {};
  for (const [type, handler] of Object.entries(table)) {
    wrapped[type] = (state, msg, ctx) => {
      state.plan = depsOf(ctx).catalog.plan(state.plan.id);
      return handler(state, msg, ctx);
    };
  }
  return wrapped as H;
}

function balancesOf(state: WorkspaceState): Balances {
  const { availableCredits, reservedCredits, walletCents, reservedWalletCents, walletActivated } = state.account;
  return {
    availableCredits,
    reservedCredits,
    walletCents,
    reservedWalletCents,
    walletActivated,
    activeJobs: state.jobs.holdingSlots,
    queuedJobs: state.jobs.count('queued'),
  };
}

async function create(
  state: WorkspaceState,
  draft: GenerationDraft,
  idempotency: { key: string; hash: string } | undefined,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, CreateReply>> {
  let seen: IdempotencyEntry | undefined;
  if (idempotency) {
    seen = state.idempotency.get(idempotency.key, ctx.clock.now());
    if (!seen) {
      seen = await findIdempotencyKey(ctx, idempotency.key);
      if (seen) state.idempotency.remember(idempotency.key, seen);
    }
  }
  await ensureKeys(state, [draft.apiKeyId], ctx);
  const admitted = admit(state, draft, idempotency, seen, ctx, true);
  return admitted instanceof Promise ? { state, replyWhenDurable: admitted } : { state, reply: admitted };
}

/**
 * The creates of a batch, in order, as the same number of `create` messages would make them, but with one
 * lookup of their stored Idempotency-Keys and no await between them: every row joins the same group commit
 * (creationsOf), so the batch costs the statements of one create. An item whose key an earlier item of the
 * batch took is that item's answer again (replayed) if it is the same request, and a conflict if it is not.
 */
async function createBatch(state: WorkspaceState, items: CreateItem[], ctx: ActorContext): Promise<Outcome<WorkspaceState, CreateReply[]>> {
  const now = ctx.clock.now();
  const unknown = [...new Set(items.flatMap((item) => (item.idempotency && !state.idempotency.get(item.idempotency.key, now) ? [item.idempotency.key] : [])))];
  const stored = unknown.length > 0 ? await findIdempotencyKeys(ctx, unknown) : new Map<string, IdempotencyEntry>();
  for (const [key, entry] of stored) if (!state.idempotency.get(key, now)) state.idempotency.remember(key, entry);
  await ensureKeys(
    state,
    items.map((item) => item.draft.apiKeyId),
    ctx,
  );

  const takenHere = new Map<string, { hash: string; reply: CreateReply | Promise<CreateReply> }>();
  const replies: Array<CreateReply | Promise<CreateReply>> = [];
  for (const { draft, idempotency } of items) {
    const earlier = idempotency && takenHere.get(idempotency.key);
    if (idempotency && earlier) {
      replies.push(
        earlier.hash !== idempotency.hash
          ? { kind: 'refused', code: 'conflict', message: 'This Idempotency-Key was already used with a different request body.' }
          : Promise.resolve(earlier.reply).then(asReplay),
      );
      continue;
    }
    const seen = idempotency && state.idempotency.get(idempotency.key, now);
    const reply = admit(state, draft, idempotency, seen, ctx, false);
    if (idempotency && (reply instanceof Promise || reply.kind !== 'refused')) takenHere.set(idempotency.key, { hash: idempotency.hash, reply });
    replies.push(reply);
  }
  if (!replies.some((r) => r instanceof Promise)) return { state, reply: replies as CreateReply[] };
  // Answered once every item has settled, not at the first that failed: the actor reloads after a failed write
  // only once its writes in flight are done, and a reload read while later items were still committing would
  // leave those jobs out of its memory.
  const all = Promise.allSettled(replies).then((settled) => {
    const failed = settled.find((item): item is PromiseRejectedResult => item.status === 'rejected');
    if (failed) throw failed.reason;
    return settled.map((item) => (item as PromiseFulfilledResult<CreateReply>).value);
  });
  // One schedule for the whole batch once it is committed, not one per item. Also when an item failed: the
  // actor then reloads its state before that message, and the items that did commit start from there.
  const scheduleAll = () => ctx.actors.tell('ws', state.workspaceId, { type: 'schedule' });
  all.then(scheduleAll, scheduleAll);
  return { state, replyWhenDurable: all };
}

/** A first answer given again to a later item with the same key and request. */
function asReplay(reply: CreateReply): CreateReply {
  return reply.kind === 'created' ? { kind: 'replay', status: 201, generation: reply.generation } : reply;
}

/**
 * Decides one create against the workspace's state, synchronously: refused or replayed at once, or accepted
 * (credits reserved in memory, the row handed to the group commit), answered once the row is durable.
 * `seen` is the Idempotency-Key's entry, already looked up. Once the row commits, the actor tells itself
 * `create_committed`; `scheduleWhenDurable`: it then schedules (a batch tells it once for all its rows).
 */
function admit(
  state: WorkspaceState,
  draft: GenerationDraft,
  idempotency: { key: string; hash: string } | undefined,
  seen: IdempotencyEntry | undefined,
  ctx: ActorContext,
  scheduleWhenDurable: boolean,
): CreateReply | Promise<CreateReply> {
  const refuse = (code: Extract<CreateReply, { kind: 'refused' }>['code'], message: string): CreateReply => ({ kind: 'refused', code, message });

  if (seen) {
    if (seen.hash !== idempotency!.hash) return refuse('conflict', 'This Idempotency-Key was already used with a different request body.');
    if (!seen.result) return refuse('conflict', 'A request with this Idempotency-Key is still being processed.');
    return { kind: 'replay', status: seen.result.status, generation: seen.result.generation };
  }
  if (!draft.modelPlans.includes(state.plan.id)) {
    return refuse('plan_limit_reached', `Model ${draft.modelId} is not available on the ${state.plan.name} plan.`);
  }
  const limit = state.plan.concurrentJobs * QUEUE_FACTOR;
  // Jobs reserved at their creation hold their slot already: the ones still being created to queue count apart.
  const { jobs } = state;
  if (jobs.holdingSlots + jobs.count('queued') + jobs.count('creating') >= limit) {
    return refuse('plan_limit_reached', `The ${state.plan.name} plan allows ${limit} unfinished jobs at a time (${state.plan.concurrentJobs} running).`);
  }

  const now = ctx.clock.now();
  const key = draft.apiKeyId === null ? undefined : state.keys.get(draft.apiKeyId);
  const byKey = key && refuseByKey(key, draft.modelId, draft.credits, now);
  if (byKey) return refuse(byKey.code, byKey.message);

  const id = draft.id ?? newId('gen', now);
  const spend = spendAt(state.spend, now);
  const money = reserveWithinCap(
    state.account,
    id,
    draft.credits,
    draft.paymentMode,
    state.plan.centsPerCredit,
    state.wallet.monthlySpendCapCents,
    spend,
    key && walletCapOf(key, now),
  );
  if (!money.ok) return refuse(money.code, money.message);
  const at = new Date(now);
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
    queueDeadline: new Date(now + depsOf(ctx).queueTimeoutMs),
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
  maybeAutoRecharge(state, ctx);
  const keyExpiresAt = now + IDEMPOTENCY_TTL_MS;
  if (idempotency) state.idempotency.begin(idempotency.key, idempotency.hash, keyExpiresAt);

  // Kept with the job: it starts (perhaps after a restart) in the trace of the request that made it.
  const traceContext = captureJobContext();
  const creation = {
    generation,
    traceContext,
    money: { workspaceId: state.workspaceId, entries, at },
    keySpend,
    idempotency: idempotency && { key: idempotency.key, hash: idempotency.hash, expiresAt: new Date(keyExpiresAt) },
  };
  const slotKey = depsOf(ctx).slotKeyOf(draft.provider, draft.deploymentId);
  const tookSlot = takesSlotAtCreation(state, id, slotKey, ctx);
  const deadline = generation.queueDeadline.getTime();
  state.jobs.put(
    acceptedJob({ id, slotKey, deadline, row: generation, ...(traceContext ? { trace: traceContext } : {}), ...(keyJob ? { key: keyJob } : {}) }, tookSlot),
  );
  // Once committed, the answer as its Idempotency-Key keeps it: the job as created, queued.
  const remembered = idempotency && { key: idempotency.key, entry: { hash: idempotency.hash, expiresAt: keyExpiresAt, result: { status: 201, generation } } };
  if (tookSlot) return createReserved(state, creation, remembered, ctx);
  // Its deadline is watched from now (the timer fires only for queued jobs: one still being created is
  // watched again once committed), so a caller answered the job was created finds its expiry set.
  armExpiry(state, ctx, deadline);
  const written = creationsOf(ctx.writer).add(creation);
  return written.then((): CreateReply => {
    ctx.actors.tell('ws', state.workspaceId, { type: 'create_committed', generationId: id, idempotency: remembered, schedule: scheduleWhenDurable });
    // The creation committed: the live streams see the job queued.
    depsOf(ctx).live?.publish(generation);
    depsOf(ctx).metrics?.generationTransition('new', 'queued');
    return { kind: 'created', generation };
  });
}

/**
 * A create's row committed: the job joins the queue (its deadline watched) or, reserved at creation, is
 * active; its Idempotency-Key answers it from now on. A job the actor no longer has as being created (its
 * state was reloaded since, from a database that has the row) is left as it is.
 */
function createCommitted(state: WorkspaceState, msg: Extract<WorkspaceMessage, { type: 'create_committed' }>, ctx: ActorContext): void {
  const job = state.jobs.get(msg.generationId);
  if (job && (job.status === 'creating' || job.status === 'starting')) {
    const committed = committedJob(job);
    state.jobs.put(committed);
    if (committed.deadline !== undefined) armExpiry(state, ctx, committed.deadline);
    if (msg.idempotency) state.idempotency.remember(msg.idempotency.key, msg.idempotency.entry);
  }
  depsOf(ctx).budgets?.moneyMoved(state.workspaceId);
  if (msg.schedule) schedule(state, ctx);
}

/**
 * Whether a new job takes a slot at once, reserved in its creation's transaction: the plan has a free slot,
 * no job waits for one (queued, being created to queue, or recovered during a pause), generation runs, the
 * shard stays here, and the job's provider has room (acquired here). Saves the job a commit of its own
 * before its provider is called.
 */
function takesSlotAtCreation(state: WorkspaceState, id: string, provider: string, ctx: ActorContext): boolean {
  const { generationPaused, handingOver, capacity } = depsOf(ctx);
  const { jobs } = state;
  if (jobs.holdingSlots >= state.plan.concurrentJobs || jobs.count('queued') > 0 || jobs.count('creating') > 0 || jobs.count('held') > 0) return false;
  if (generationPaused() || handingOver?.(state.workspaceId)) return false;
  // Only a free slot nobody waits for: otherwise the job queues and asks in its turn (docs/generations.md, Fair shares).
  return capacity.acquireIfFree(provider, id, state.workspaceId, state.plan.fairShareWeight);
}

/**
 * A create whose job holds its slot from the start: its row is written reserved (its first attempt counted,
 * its timeline queued then reserved), and its actor hands it to its provider once committed. The answer is
 * the job as created, queued, its first state (docs/generations.md, States). The slot it takes may be one that a
 * settlement not yet committed freed: its creation is then queued behind the workspace's last settlement, so
 * that no crash can leave the new job reserved and the old one still running. Otherwise (the workspace within
 * its plan even counting those slots as taken) it goes with the other creates, in either of their lanes.
 */
function createReserved(
  state: WorkspaceState,
  creation: Creation,
  remembered: Extract<WorkspaceMessage, { type: 'create_committed' }>['idempotency'],
  ctx: ActorContext,
): Promise<CreateReply> {
  const queued = creation.generation;
  const reserved = decide(queued, { type: 'reserve' }, queued.createdAt.getTime());
  if (!reserved.ok) throw new Error(`a new job could not be reserved: ${reserved.message}`);
  // Its effects (the hand-over) are its generation actor's, told `start` once this commits.
  const row = reserved.state;
  const reservedCreation = { ...creation, generation: row, answer: queued };
  // The new job holds its slot already; slots freed by settlements not yet committed count as taken.
  const written =
    state.jobs.holdingSlots + state.jobs.count('settling') <= state.plan.concurrentJobs
      ? creationsOf(ctx.writer).add(reservedCreation)
      : reservedCreationsOf(ctx.writer).addAfter(reservedCreation, state.lastSettlement).committed;
  return written.then(
    (): CreateReply => {
      // Told before the job's own actor, whose settlement of it then comes after.
      ctx.actors.tell('ws', state.workspaceId, { type: 'create_committed', generationId: row.id, idempotency: remembered, schedule: false });
      depsOf(ctx).live?.publish(queued);
      depsOf(ctx).metrics?.generationTransition('new', 'queued');
      withJobContext(creation.traceContext ?? undefined, () => ctx.actors.tell('gen', row.id, { type: 'start', row }));
      return { kind: 'created', generation: queued };
    },
    (error: unknown) => {
      // The slot it held is free again (the actor reloads its state from the database before that message).
      ctx.actors.tell('ws', state.workspaceId, { type: 'create_failed', generationId: row.id });
      throw error;
    },
  );
}

async function settle(
  state: WorkspaceState,
  msg: Extract<WorkspaceMessage, { type: 'settle' }>,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, SettleReply>> {
  const { generationId, money: kind, settlement: asked, progress } = msg;
  const terms = asked.generation.tokenTerms;
  let settlement = asked;
  let carry: bigint | undefined;
  let charge: Settlement['charge'];
  let money;
  if (kind === 'capture' && terms) {
    // A token-priced job is charged what it used (its carry taken in), the rest of its reservation released.
    const reserved = asked.generation.credits;
    const used = asked.generation.usage ?? { inputTokens: 0, outputTokens: 0 };
    const tokens = tokenCharge(terms, used, reserved, state.account.tokenCarryNano);
    money = capturePart(state.account, generationId, tokens.credits, reserved);
    carry = tokens.carryNano;
    // Kept with the generation: why it cost what it cost (GET /v1/generations/:id, price).
    charge = {
      exactNano: String(exactNano(terms, used)),
      carryBeforeNano: String(state.account.tokenCarryNano),
      carryAfterNano: String(tokens.carryNano),
      capped: tokens.capped,
    };
    settlement = {
      ...asked,
      generation: { ...asked.generation, credits: tokens.credits },
      ...(asked.event ? { event: { ...asked.event, generation: { ...asked.event.generation, credits: tokens.credits } } } : {}),
    };
  } else {
    money = kind === 'capture' ? capture(state.account, generationId) : release(state.account, generationId);
  }
  if (!money.ok) throw new Error(`settling ${generationId} was refused: ${money.message}`);
  const carryDelta = carry === undefined || money.entries.length === 0 ? 0 : Number(carry - state.account.tokenCarryNano);
  if (carry !== undefined && money.entries.length > 0) money.account.tokenCarryNano = carry;
  const now = ctx.clock.now();
  const at = new Date(now);
  state.account = money.account;
  const spend = spendAt(state.spend, now);
  state.spend = { month: spend.month, spentCents: spend.spentCents + spendChange(money.entries) };
  // A terminal job holds no slot: not the one it held (heldSlot), nor one granted a moment ago whose
  // `reserve` it will never take (it ended while queued, e.g. cancelled or expired). One that freed a slot
  // stays, settling, until its settlement commits; any other leaves the workspace now.
  const job = state.jobs.get(generationId);
  const freedSlot = job !== undefined && holdsSlot(job);
  const keyJob = job?.status === 'settling' ? undefined : job?.key;
  const settling = job && settledJob(job);
  if (settling) state.jobs.put(settling);
  else state.jobs.delete(generationId);
  depsOf(ctx).capacity.release(generationId);
  const released = money.entries.find((e) => e.kind === 'release');
  // What the settlement gave back leaves the key's spend: the whole job on a release, the unused part of a token-priced capture.
  const back =
    !keyJob || !released
      ? undefined
      : kind === 'release'
        ? { credits: keyJob.credits, walletCents: keyJob.walletCents }
        : { credits: keyJob.credits - settlement.generation.credits, walletCents: released.walletCents };
  const keySpend = keyJob ? settleKey(state.keys.get(keyJob.keyId), keyJob, state.workspaceId, back) : [];

  const row: Settlement = {
    generationId,
    settlement,
    updatedAt: at,
    money: { workspaceId: state.workspaceId, entries: money.entries, at, tokenCarryNano: carryDelta },
    endpointIds: [],
    keySpendDeltas: keySpend,
    ...(charge && money.entries.length > 0 ? { charge } : {}),
  };
  // Its transitions not written yet go just before it, queued in the same turn: one group commit. Else it
  // goes behind the job's progress writes still to commit.
  const added = writeSettlement(ctx.writer, row, progress ? writeProgressOf(ctx.writer, progress).position : pendingProgressOf(ctx.writer, generationId));
  state.lastSettlement = added.position;
  schedule(state, ctx);
  const charged = kind === 'capture' ? settlement.generation.credits : 0;
  const committed = added.committed.then((): SettleReply => {
    if (freedSlot) ctx.actors.tell('ws', state.workspaceId, { type: 'settle_committed', generationId });
    depsOf(ctx).budgets?.moneyMoved(state.workspaceId);
    // The endpoints of its generation.started, if its progress made one, are woken with those of its end.
    return { settled: true, endpointIds: [...(progress?.endpointIds ?? []), ...row.endpointIds], credits: charged };
  });
  return { state, replyWhenDurable: committed };
}

/**
 * Starts queued jobs, oldest first, while the plan's concurrency allows and generation is not paused. A job
 * whose provider is at its capacity stays queued (jobs of other providers behind it may start); the
 * provider's capacity grants this workspace a slot in fair order and tells it to schedule again. Jobs
 * recovered during a pause (which already hold their slot and capacity) are let go first.
 */
function schedule(state: WorkspaceState, ctx: ActorContext): void {
  const { generationPaused, handingOver, capacity } = depsOf(ctx);
  if (generationPaused() || handingOver?.(state.workspaceId)) return;
  const { jobs } = state;
  if (jobs.count('held') > 0) {
    for (const job of jobs.values()) {
      if (job.status !== 'held') continue;
      jobs.put(letGoJob(job));
      ctx.actors.tell('gen', job.id, { type: 'recover' });
    }
  }
  if (jobs.holdingSlots >= state.plan.concurrentJobs || jobs.count('queued') === 0) return;
  // Oldest first; a job whose provider is at its capacity keeps its place, and those behind it may start.
  let unseen = jobs.count('queued');
  for (const job of jobs.values()) {
    if (jobs.holdingSlots >= state.plan.concurrentJobs || unseen === 0) break;
    if (job.status !== 'queued') continue;
    unseen--;
    if (!capacity.tryAcquire(job.slotKey, job.id, state.workspaceId, state.plan.fairShareWeight)) continue;
    jobs.put(grantedJob(job));
    withJobContext(job.trace, () => ctx.actors.tell('gen', job.id, { type: 'reserve', row: job.row }));
  }
}

function loaded(record: WorkspaceRecord, ctx: ActorContext): WorkspaceState {
  const state = workspaceStateOf(record, ctx);
  armExpiry(state, ctx);
  return state;
}

/**
 * Arms the workspace's one queue timer: for `deadline` (a job just accepted or queued) if it is earlier than
 * the one armed, or else for the earliest deadline of the queued jobs.
 */
function armExpiry(state: WorkspaceState, ctx: ActorContext, deadline?: number): void {
  if (deadline !== undefined) {
    if (state.expiryAt !== undefined && state.expiryAt <= deadline) return;
  } else {
    for (const job of state.jobs.values()) {
      const d = job.status === 'queued' ? job.deadline : undefined;
      if (d !== undefined && (deadline === undefined || d < deadline)) deadline = d;
    }
    if (deadline === undefined) return;
  }
  state.expiryTimer?.cancel();
  state.expiryAt = deadline;
  state.expiryTimer = ctx.clock.setTimer(() => ctx.actors.tell('ws', state.workspaceId, { type: 'expire_queued' }), Math.max(0, deadline - ctx.clock.now()));
}

/** Queued jobs past their deadline are told to expire (each settles through this actor), and the timer moves to the next deadline. */
function expireQueued(state: WorkspaceState, ctx: ActorContext): void {
  state.expiryTimer?.cancel();
  state.expiryTimer = undefined;
  state.expiryAt = undefined;
  const now = ctx.clock.now();
  for (const job of state.jobs.values()) {
    if (job.status !== 'queued' || job.deadline === undefined || job.deadline > now) continue;
    state.jobs.put(expiringJob(job));
    ctx.actors.tell('gen', job.id, { type: 'expire' });
  }
  armExpiry(state, ctx);
}

/** A workspace's first account: the plan's monthly credits, granted once (the ledger's reference makes it so). */
async function openAccount(ctx: ActorContext, plan: PlanEntitlements): Promise<void> {
  const at = new Date(ctx.clock.now());
  const reference = `plan:${plan.id}:opening`;
  const granted = grant(emptyAccount(), plan.monthlyCredits, reference);
  if (!granted.ok) return;
  await ctx.writer.write((em) => writeOpeningAccount(em, ctx.id, { reference, entries: granted.entries }, at));
}

async function findIdempotencyKey(ctx: ActorContext, key: string): Promise<IdempotencyEntry | undefined> {
  return (await findIdempotencyKeys(ctx, [key])).get(key);
}

/** The workspace's unexpired stored Idempotency-Keys among `keys`, in one query. */
async function findIdempotencyKeys(ctx: ActorContext, keys: string[]): Promise<Map<string, IdempotencyEntry>> {
  const found = new Map<string, IdempotencyEntry>();
  for (const row of await readIdempotencyKeys(openUnit(ctx.db), ctx.id, keys, ctx.clock.now())) {
    found.set(row.key, { hash: row.requestHash, expiresAt: row.expiresAt, result: { status: row.responseStatus, generation: row.generation } });
  }
  return found;
}

/** Loads the limits and spend of the keys among `keyIds` this actor has not seen yet (one lookup for all). */
async function ensureKeys(state: WorkspaceState, keyIds: Array<string | null>, ctx: ActorContext): Promise<void> {
  const missing = [...new Set(keyIds.filter((id): id is string => id !== null && !state.keys.has(id)))];
  if (missing.length === 0) return;
  for (const [id, key] of await loadKeySpends(ctx, missing, ctx.clock.now())) state.keys.set(id, key);
}

/**
 * A change of a key's spending controls: written to its row, and in force for the next create (this actor
 * decides every create of the workspace, so none is decided against the old limits once this is applied).
 */
async function changeKeyLimits(
  state: WorkspaceState,
  keyId: string,
  patch: KeyLimitsPatch,
  ctx: ActorContext,
): Promise<Outcome<WorkspaceState, KeyLimitsReply>> {
  await ensureKeys(state, [keyId], ctx);
  const key = state.keys.get(keyId);
  if (!key) return { state, reply: { found: false } };
  const limits = patchKeyLimits(key.limits, patch);
  key.limits = limits;
  const at = new Date(ctx.clock.now());
  const written = ctx.writer.write((em) => writeKeyLimits(em, state.workspaceId, keyId, limits, at));
  return { state, replyWhenDurable: written.then((): KeyLimitsReply => ({ found: true, limits })) };
}
