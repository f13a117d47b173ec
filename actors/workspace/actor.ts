import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { ActorContext, KindBehavior } from '../kinds.ts';
import type { PlanEntitlements } from '../../domain/plans.ts';
import type { KeySpend } from '../../domain/key-limits.ts';
import { emptyAccount, grant } from '../../domain/account.ts';
import { newId } from '../../persistence/ids.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { readIdempotencyKeys } from '../../persistence/stores/workspace/idempotency.ts';
import { readWorkspaces, type WorkspaceRecord } from '../../persistence/stores/workspace/load.ts';
import { writeOpeningAccount } from '../../persistence/stores/workspace/money.ts';
import { captureJobContext } from '../../runtime/tracing.ts';
import { depsOf } from '../deps.ts';
import { decideCreate, decideCreateBatch, decideCreateCommitted, decideCreateFailed, type CreateFacts, type CreateRequest } from './decide-create.ts';
import { decideExpireQueued, decideLoaded } from './decide-expiry.ts';
import { decideKeyLimits, decideKeyUsage } from './decide-keys.ts';
import { decideHoldRecovered, decideSchedule, decideSlotDeclined } from './decide-schedule.ts';
import { decideSettle, decideSettleCommitted } from './decide-settle.ts';
import type { IdempotencyEntry } from './idempotency-cache.ts';
import { loadKeySpends, workspaceStateOf } from './load.ts';
import {
  applyPaymentEvent,
  autoRecharge,
  cancelSubscription,
  rechargeCharged,
  renewalCharged,
  renewSubscription,
  updateWalletSettings,
  walletSnapshot,
} from './payments.ts';
import type { Balances, CreateItem, CreateReply, SettleReply, WorkspaceMessage } from './protocol.ts';
import { answer, performAll } from './perform.ts';
import { priceOrder } from './pricing.ts';
import type { WorkspaceActorState } from './state.ts';

type State = WorkspaceActorState;

/**
 * The single writer of a workspace's credits and wallet, and its job scheduler: reserves at creation,
 * captures or releases at the end in the same transaction as the generation's terminal state, and lets
 * queued jobs start as the plan's concurrency allows. Each handler reads what only the database has, asks
 * its decider (decide-*.ts: pure, the state changes and the effects as data), and performs the effects.
 */
export const workspaceActor: KindBehavior<'ws', State> = {
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

  handlers: {
    create: (state, msg, ctx) => create(state, msg, ctx),
    create_batch: (state, msg, ctx) => createBatch(state, msg.items, ctx),
    settle: (state, msg, ctx) => settle(state, msg, ctx),
    slot_declined: (state, msg, ctx) => answer(decideSlotDeclined(state, msg.generationId, factsOf(state, ctx), depsOf(ctx).capacity), ctx),
    schedule: (state, _msg, ctx) => answer(decideSchedule(state, factsOf(state, ctx), depsOf(ctx).capacity), ctx),
    hold_recovered: (state, msg, ctx) => answer(decideHoldRecovered(state, msg.generationId, factsOf(state, ctx), depsOf(ctx).capacity), ctx),
    create_committed: (state, msg, ctx) => answer(decideCreateCommitted(state, msg, factsOf(state, ctx), depsOf(ctx).capacity), ctx),
    create_failed: (state, msg, ctx) => answer(decideCreateFailed(state, msg.generationId, factsOf(state, ctx), depsOf(ctx).capacity), ctx),
    settle_committed: (state, msg, ctx) => answer(decideSettleCommitted(state, msg.generationId), ctx),
    expire_queued: (state, _msg, ctx) => answer(decideExpireQueued(state, ctx.clock.now()), ctx),
    preloaded: (state) => ({ state, reply: balancesOf(state) }),
    balances: (state) => ({ state, reply: balancesOf(state) }),
    payment_event: (state, msg, ctx) => applyPaymentEvent(state, msg.provider, msg.event, ctx),
    renew: (state, msg, ctx) => renewSubscription(state, msg.subscriptionId, ctx),
    cancel_subscription: (state, _msg, ctx) => cancelSubscription(state, ctx),
    wallet: (state, _msg, ctx) => walletSnapshot(state, ctx),
    wallet_settings: (state, msg, ctx) => updateWalletSettings(state, msg.patch, ctx),
    auto_recharge: (state, _msg, ctx) => autoRecharge(state, ctx),
    recharge_charged: (state, msg, ctx) => rechargeCharged(state, msg, ctx),
    renewal_charged: (state, msg, ctx) => renewalCharged(state, msg, ctx),
    key_limits: async (state, msg, ctx) => {
      const read = await keysNotSeen(state, [msg.keyId], ctx);
      return answer(decideKeyLimits(state, msg.keyId, msg.patch, read, ctx.clock.now()), ctx);
    },
    key_usage: async (state, msg, ctx) => {
      const read = await keysNotSeen(state, [msg.keyId], ctx);
      return answer(decideKeyUsage(state, msg.keyId, read, ctx.clock.now()), ctx);
    },
  },

  keepAlive: (state) => state.jobs.count('queued') > 0 || state.jobs.holdingSlots > 0 || state.jobs.uncommitted > 0,
};

/**
 * What the deciders read of the service, read once for the message: the plan as the catalog serves it now (a
 * reload may have changed its limits), the emergency stop, a handover of the shard, the queue's timeout.
 */
function factsOf(state: State, ctx: ActorContext): CreateFacts {
  const deps = depsOf(ctx);
  return {
    plan: deps.catalog.plan(state.plan.id),
    paused: deps.generationPaused(),
    handingOver: deps.handingOver?.(state.workspaceId) ?? false,
    queueTimeoutMs: deps.queueTimeoutMs,
  };
}

function balancesOf(state: State): Balances {
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

/**
 * A create as its decider takes it: its order priced and routed by the catalog served now (pricing.ts: the
 * deployment's choice reads its jobs in flight and draws at random, so it is made here and not in the pure
 * decider), its job's id made, its slot key, and the trace of the request that made it.
 */
function requestOf(item: CreateItem, now: number, ctx: ActorContext): CreateRequest {
  const { order, idempotency } = item;
  const deps = depsOf(ctx);
  const priced = priceOrder(order, deps.catalog, { inFlight: (id) => deps.providers.inFlight(id), random: Math.random });
  return {
    priced,
    idempotency,
    id: order.id ?? newId('gen', now),
    slotKey: priced.ok ? deps.slotKeyOf(priced.draft.provider, priced.draft.deploymentId) : '',
    trace: captureJobContext(),
  };
}

/** `create`: its Idempotency-Key read from the database when memory does not hold it, its key's spend when not seen yet. */
async function create(state: State, item: CreateItem, ctx: ActorContext): Promise<Outcome<State, CreateReply>> {
  const { order, idempotency } = item;
  const stored = idempotency && !state.idempotency.get(idempotency.key, ctx.clock.now()) ? await findIdempotencyKeys(ctx, [idempotency.key]) : undefined;
  const keys = await keysNotSeen(state, [order.apiKeyId], ctx);
  const now = ctx.clock.now();
  const decision = decideCreate(state, requestOf(item, now, ctx), { stored, keys }, factsOf(state, ctx), depsOf(ctx).capacity, now);
  return answer(decision, ctx);
}

/** `create_batch`: one lookup of the items' stored Idempotency-Keys and of their keys not seen yet, then no await between the items. */
async function createBatch(state: State, items: CreateItem[], ctx: ActorContext): Promise<Outcome<State, CreateReply[]>> {
  const before = ctx.clock.now();
  const unknown = [
    ...new Set(items.flatMap((item) => (item.idempotency && !state.idempotency.get(item.idempotency.key, before) ? [item.idempotency.key] : []))),
  ];
  const stored = unknown.length > 0 ? await findIdempotencyKeys(ctx, unknown) : undefined;
  const keys = await keysNotSeen(
    state,
    items.map((item) => item.order.apiKeyId),
    ctx,
  );
  const now = ctx.clock.now();
  const requests = items.map((item) => requestOf(item, now, ctx));
  return answer(decideCreateBatch(state, requests, { stored, keys }, factsOf(state, ctx), depsOf(ctx).capacity, now), ctx);
}

/** `settle`: answered once its settlement committed, with the endpoints its event (and its progress's) reached. */
function settle(state: State, msg: Extract<WorkspaceMessage, { type: 'settle' }>, ctx: ActorContext): Outcome<State, SettleReply> {
  const decision = decideSettle(state, msg, factsOf(state, ctx), depsOf(ctx).capacity, ctx.clock.now());
  const written = performAll(decision, ctx);
  const write = decision.effects.find((effect) => effect.type === 'write_settlement');
  if (!written || !write) throw new Error(`settling ${msg.generationId} wrote nothing`);
  const endpointsOf = () => [...(write.progress?.endpointIds ?? []), ...write.settlement.endpointIds];
  return { state, replyWhenDurable: written.then((): SettleReply => ({ ...decision.reply, endpointIds: endpointsOf() })) };
}

function loaded(record: WorkspaceRecord, ctx: ActorContext): State {
  const state = workspaceStateOf(record, ctx);
  performAll(decideLoaded(state), ctx);
  return state;
}

/** A workspace's first account: the plan's monthly credits, granted once (the ledger's reference makes it so). */
async function openAccount(ctx: ActorContext, plan: PlanEntitlements): Promise<void> {
  const at = new Date(ctx.clock.now());
  const reference = `plan:${plan.id}:opening`;
  const granted = grant(emptyAccount(), plan.monthlyCredits, reference);
  if (!granted.ok) return;
  await ctx.writer.write((em) => writeOpeningAccount(em, ctx.id, { reference, entries: granted.entries }, at));
}

/** The workspace's unexpired stored Idempotency-Keys among `keys`, in one query. */
async function findIdempotencyKeys(ctx: ActorContext, keys: string[]): Promise<Map<string, IdempotencyEntry>> {
  const found = new Map<string, IdempotencyEntry>();
  for (const row of await readIdempotencyKeys(openUnit(ctx.db), ctx.id, keys, ctx.clock.now())) {
    found.set(row.key, { hash: row.requestHash, expiresAt: row.expiresAt, result: { status: row.responseStatus, generation: row.generation } });
  }
  return found;
}

/** The limits and spend of the keys among `keyIds` this actor has not seen yet (one lookup for all); undefined, read nothing, when it has seen them all. */
async function keysNotSeen(state: State, keyIds: Array<string | null>, ctx: ActorContext): Promise<Map<string, KeySpend> | undefined> {
  const missing = [...new Set(keyIds.filter((id): id is string => id !== null && !state.keys.has(id)))];
  if (missing.length === 0) return undefined;
  return loadKeySpends(ctx, missing, ctx.clock.now());
}
