import t, { type Test } from 'tap';
import type { TokenTerms } from '../../domain/catalog/pricing.ts';
import { dayStart, monthStart, noKeyLimits, type KeyLimits, type KeySpend } from '../../domain/key-limits.ts';
import {
  decideCreate,
  decideCreateBatch,
  decideCreateCommitted,
  decideCreateFailed,
  IDEMPOTENCY_TTL_MS,
  type CreateFacts,
  type CreateLookups,
  type CreateRequest,
} from '../../actors/workspace/decide-create.ts';
import { decideExpireQueued, decideLoaded } from '../../actors/workspace/decide-expiry.ts';
import { decideKeyLimits, decideKeyUsage } from '../../actors/workspace/decide-keys.ts';
import { decideHoldRecovered, decideSchedule, decideSlotDeclined } from '../../actors/workspace/decide-schedule.ts';
import { decideSettle, decideSettleCommitted } from '../../actors/workspace/decide-settle.ts';
import type { FollowUp, SlotPort, WorkspaceEffect } from '../../actors/workspace/decision.ts';
import type { IdempotencyEntry } from '../../actors/workspace/idempotency-cache.ts';
import { loadedJob } from '../../actors/workspace/jobs.ts';
import type { GenerationDraft, GenerationSettlement, WorkspaceMessage } from '../../actors/workspace/protocol.ts';
import type { WorkspaceState } from '../../actors/workspace/state.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { funded, NOW, planOf, stateOf, TIMEOUT, WS } from './workspace-fixtures.ts';

/*
 * The workspace actor's deciders (actors/workspace/decide-*.ts) on their own: no database, no server, no clock
 * but the `now` handed in. Each story drives a state through messages and reads the state, the reply and the
 * effects the actor would perform.
 */

function factsOf(state: WorkspaceState, patch: Partial<CreateFacts> = {}): CreateFacts {
  return { plan: state.plan, paused: false, handingOver: false, queueTimeoutMs: TIMEOUT, ...patch };
}

/** The providers' slots: `free` slots per slot key, each call recorded. */
class Slots implements SlotPort {
  readonly calls: string[] = [];
  readonly held = new Map<string, string>();
  constructor(readonly free: Record<string, number> = {}) {}
  private take(slotKey: string, generationId: string): boolean {
    if ((this.free[slotKey] ?? 0) <= 0) return false;
    this.free[slotKey]!--;
    this.held.set(generationId, slotKey);
    return true;
  }
  acquireIfFree(slotKey: string, generationId: string, workspaceId: string, weight: number): boolean {
    this.calls.push(`acquireIfFree ${slotKey} ${generationId} ${workspaceId} ${weight}`);
    return this.take(slotKey, generationId);
  }
  tryAcquire(slotKey: string, generationId: string, workspaceId: string, weight: number): boolean {
    this.calls.push(`tryAcquire ${slotKey} ${generationId} ${workspaceId} ${weight}`);
    return this.take(slotKey, generationId);
  }
  release(generationId: string): void {
    this.calls.push(`release ${generationId}`);
    const slotKey = this.held.get(generationId);
    if (slotKey === undefined) return;
    this.held.delete(generationId);
    this.free[slotKey] = (this.free[slotKey] ?? 0) + 1;
  }
}

function draftOf(patch: Partial<GenerationDraft> = {}): GenerationDraft {
  return {
    workspaceId: WS,
    apiKeyId: null,
    userId: 'usr_1',
    mode: 'text-to-image',
    modelId: 'flux',
    provider: 'local',
    deploymentId: 'flux-local',
    tokenTerms: null,
    params: { prompt: 'a cat' },
    inputs: {},
    paymentMode: 'credits',
    credits: 10,
    project: null,
    modelPlans: ['free', 'pro'],
    ...patch,
  };
}

let ids = 0;
function requestOf(patch: Partial<GenerationDraft> = {}, idempotency?: { key: string; hash: string }, slotKey = 'local'): CreateRequest {
  return { priced: { ok: true, draft: draftOf(patch) }, ...(idempotency ? { idempotency } : {}), id: `gen_${++ids}`, slotKey, trace: null };
}

const none: CreateLookups = {};

type Write = Extract<WorkspaceEffect, { type: 'write_creation' }>;
type SettlementWrite = Extract<WorkspaceEffect, { type: 'write_settlement' }>;
const writesOf = (effects: WorkspaceEffect[]): Write[] => effects.filter((e): e is Write => e.type === 'write_creation');
const typesOf = (effects: ReadonlyArray<WorkspaceEffect | FollowUp>): string[] => effects.map((e) => e.type);

/** A job accepted and committed to the queue, as the actor would have it. */
function queuedJob(state: WorkspaceState, slots: Slots, patch: Partial<GenerationDraft> = {}, slotKey = 'local', at = NOW): string {
  const request = requestOf(patch, undefined, slotKey);
  const decided = decideCreate(state, request, none, factsOf(state, { paused: true }), slots, at);
  if (decided.reply.kind !== 'created') throw new Error(`not created: ${JSON.stringify(decided.reply)}`);
  decideCreateCommitted(state, { type: 'create_committed', generationId: request.id, schedule: false }, factsOf(state, { paused: true }), slots);
  return request.id;
}

/** A job reserved at creation and committed: active, holding a slot. */
function activeJob(state: WorkspaceState, slots: Slots, patch: Partial<GenerationDraft> = {}): string {
  slots.free.local = (slots.free.local ?? 0) + 1;
  const request = requestOf(patch);
  const decided = decideCreate(state, request, none, factsOf(state), slots, NOW);
  if (state.jobs.get(request.id)?.status !== 'starting') throw new Error('not reserved at creation');
  decideCreateCommitted(state, { type: 'create_committed', generationId: request.id, schedule: false }, factsOf(state), slots);
  void decided;
  return request.id;
}

function settlementOf(patch: Partial<GenerationSettlement['generation']> = {}, status: GenerationSettlement['status'] = 'succeeded'): GenerationSettlement {
  return {
    status,
    completedAt: new Date(NOW + 5_000).toISOString(),
    outputAssetIds: [],
    timeline: [],
    generation: {
      apiKeyId: null,
      createdAt: new Date(NOW),
      credits: 10,
      tokenTerms: null,
      usage: null,
      modelId: 'flux',
      mode: 'text-to-image',
      project: null,
      ...patch,
    },
  };
}

/** An activated wallet holding 1,000 cents and no credits. */
const walletOf = () => ({ ...funded(0), walletActivated: true, walletCents: 1_000 });

function keyOf(limits: Partial<KeyLimits> = {}, spent = 0): KeySpend {
  return {
    limits: { ...noKeyLimits(), ...limits },
    day: { start: dayStart(NOW), credits: spent, walletCents: 0 },
    month: { start: monthStart(NOW), credits: spent, walletCents: 0 },
    unfinished: 0,
  };
}

t.test('a create that queues: credits reserved, its row to the group commit, answered once durable', async (t) => {
  const state = stateOf();
  const slots = new Slots({ local: 0 });
  const request = requestOf();
  const { reply, effects, state: next } = decideCreate(state, request, none, factsOf(state), slots, NOW);

  t.equal(next, state, 'the next state is the state handed in, changed');
  t.equal(reply.kind, 'created');
  const generation = reply.kind === 'created' ? reply.generation : undefined;
  t.match(generation, { id: request.id, status: 'queued', credits: 10, attempts: 0, workspaceId: WS });
  t.equal(generation?.queueDeadline.getTime(), NOW + TIMEOUT, 'its deadline is the queue timeout from now');
  t.same([state.account.availableCredits, state.account.reservedCredits], [90, 10], 'its credits reserved in memory');
  t.same(state.account.reservations[request.id], { credits: 10, walletCents: 0 });
  t.equal(state.jobs.get(request.id)?.status, 'creating', 'being created, to queue once committed');
  t.same(slots.calls, [`acquireIfFree local ${request.id} ${WS} 3`], 'the provider was asked for a free slot, with the plan weight');

  t.same(typesOf(effects), ['arm_expiry', 'write_creation'], 'its deadline watched, then its write');
  t.same(effects[0], { type: 'arm_expiry', at: NOW + TIMEOUT });
  t.equal(state.expiryAt, NOW + TIMEOUT);
  const [write] = writesOf(effects);
  t.equal(write?.lane, 'creations');
  t.equal(write?.creation.generation, generation, 'the row written is the one answered');
  t.same(write?.creation.money.entries, [
    { kind: 'reserve', generationId: request.id, credits: -10, reservedCredits: 10, walletCents: 0, reservedWalletCents: 0 },
  ]);
  t.equal(write?.onFailed, undefined, 'a failed write needs nothing but the reload');
  t.same(write?.onCommitted, [
    { type: 'tell_self', msg: { type: 'create_committed', generationId: request.id, idempotency: undefined, schedule: true } },
    { type: 'publish', row: generation },
    { type: 'count_transition', from: 'new', to: 'queued' },
  ]);
});

t.test('a create with a free slot is written reserved, and its actor told to start once durable', async (t) => {
  const state = stateOf();
  const slots = new Slots({ local: 1 });
  const request = requestOf();
  const { reply, effects } = decideCreate(state, request, none, factsOf(state), slots, NOW);

  t.equal(reply.kind === 'created' && reply.generation.status, 'queued', 'answered as created: queued, its first state');
  t.equal(state.jobs.get(request.id)?.status, 'starting');
  t.equal(state.jobs.holdingSlots, 1);
  t.same(typesOf(effects), ['write_creation'], 'no queue timer for a job that never queues');
  const [write] = writesOf(effects);
  t.equal(write?.lane, 'creations', 'no settlement to wait for');
  t.match(write?.creation.generation, { id: request.id, status: 'reserved', attempts: 1 }, 'written reserved, its first attempt counted');
  t.equal(write?.creation.answer?.status, 'queued', 'its Idempotency-Key keeps the answer given: queued');
  t.same(typesOf(write?.onCommitted ?? []), ['tell_self', 'publish', 'count_transition', 'start_generation']);
  t.match(write?.onCommitted[3], { type: 'start_generation', id: request.id, msg: { type: 'start', row: { status: 'reserved' } } });
  t.same(write?.onFailed, [{ type: 'tell_self', msg: { type: 'create_failed', generationId: request.id } }], 'a failed write gives its slot back');

  t.test('and none while generation is paused or the shard is handed over: it queues', async (t) => {
    for (const facts of [{ paused: true }, { handingOver: true }]) {
      const s = stateOf();
      const p = new Slots({ local: 1 });
      const r = requestOf();
      const decided = decideCreate(s, r, none, factsOf(s, facts), p, NOW);
      t.equal(s.jobs.get(r.id)?.status, 'creating', JSON.stringify(facts));
      t.same(p.calls, [], 'the provider is not asked');
      t.equal(writesOf(decided.effects)[0]?.creation.generation.status, 'queued');
    }
  });

  t.test('nor while a job waits for one: the new job queues behind it', async (t) => {
    const s = stateOf();
    const p = new Slots({ local: 0 });
    queuedJob(s, p);
    p.free.local = 1;
    const r = requestOf();
    decideCreate(s, r, none, factsOf(s), p, NOW);
    t.equal(s.jobs.get(r.id)?.status, 'creating');
    t.equal(p.free.local, 1, 'the free slot stays for the queue');
  });
});

t.test('a create takes a slot at once only when nothing stands before it', async (t) => {
  const queuesWith = (t: Test, what: string, state: WorkspaceState, slots: Slots) => {
    slots.free.local = (slots.free.local ?? 0) + 1;
    slots.calls.length = 0;
    const r = requestOf();
    decideCreate(state, r, none, factsOf(state), slots, NOW);
    t.equal(state.jobs.get(r.id)?.status, 'creating', `${what}: it queues`);
    t.same(slots.calls, [], `${what}: the provider is not asked`);
  };
  t.test("the plan's slots all held", async (t) => {
    const state = stateOf({ plan: planOf({ concurrentJobs: 1 }) });
    const slots = new Slots();
    activeJob(state, slots);
    queuesWith(t, 'one of one slot held', state, slots);
  });
  t.test('one held of two: the second is taken at once', async (t) => {
    const state = stateOf({ plan: planOf({ concurrentJobs: 2 }) });
    const slots = new Slots();
    activeJob(state, slots);
    slots.free.local = 1;
    const r = requestOf();
    decideCreate(state, r, none, factsOf(state), slots, NOW);
    t.equal(state.jobs.get(r.id)?.status, 'starting');
  });
  t.test('a job still being created to queue', async (t) => {
    const state = stateOf();
    const slots = new Slots();
    decideCreate(state, requestOf(), none, factsOf(state, { paused: true }), slots, NOW);
    t.equal(state.jobs.count('creating'), 1);
    queuesWith(t, 'one being created', state, slots);
  });
  t.test('a job recovered during a pause, held', async (t) => {
    const state = stateOf();
    const slots = new Slots();
    decideHoldRecovered(state, activeJob(state, slots), factsOf(state, { paused: true }), slots);
    t.equal(state.jobs.count('held'), 1);
    queuesWith(t, 'one held', state, slots);
  });
});

t.test('what the workspace keeps of a job it accepted: its slot key, deadline, row, trace and key', async (t) => {
  const key = keyOf();
  const state = stateOf({ keys: new Map([['key_1', key]]) });
  const slots = new Slots({ gpu: 0 });
  const trace = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', requestId: 'req_1' };
  const request = { ...requestOf({ apiKeyId: 'key_1' }, undefined, 'gpu'), trace };
  const { reply, effects } = decideCreate(state, request, none, factsOf(state), slots, NOW);
  const row = reply.kind === 'created' ? reply.generation : undefined;
  t.same(state.jobs.get(request.id), {
    id: request.id,
    status: 'creating',
    slotKey: 'gpu',
    deadline: NOW + TIMEOUT,
    row,
    trace,
    key: { keyId: 'key_1', credits: 10, walletCents: 0, day: dayStart(NOW), month: monthStart(NOW) },
  });
  t.equal(writesOf(effects)[0]?.creation.traceContext, trace, 'the trace is written with the job');
  const plain = stateOf();
  const keyless = requestOf();
  const created = decideCreate(plain, keyless, none, factsOf(plain), new Slots({ local: 0 }), NOW);
  t.same(Object.keys(plain.jobs.get(keyless.id) ?? {}).sort(), ['deadline', 'id', 'row', 'slotKey', 'status'], 'no trace, no key: neither kept');
  t.same(writesOf(created.effects)[0]?.creation.keySpend, [], 'no key: nothing counted against one');
});

t.test('a create reserved in a slot a settlement not yet committed freed is written behind the last settlement', async (t) => {
  const state = stateOf({ plan: planOf({ concurrentJobs: 1 }) });
  const slots = new Slots();
  const old = activeJob(state, slots);
  decideSettle(state, { type: 'settle', generationId: old, money: 'capture', settlement: settlementOf() }, factsOf(state), slots, NOW);
  t.equal(state.jobs.get(old)?.status, 'settling');

  slots.free.local = 1;
  const request = requestOf();
  const { effects } = decideCreate(state, request, none, factsOf(state), slots, NOW);
  t.equal(state.jobs.get(request.id)?.status, 'starting', 'it took the freed slot');
  t.equal(writesOf(effects)[0]?.lane, 'behind_last_settlement');

  decideSettleCommitted(state, old);
  t.equal(state.jobs.get(old), undefined, 'once the settlement committed, the old job leaves');
  const later = stateOf({ plan: planOf({ concurrentJobs: 2 }) });
  const s2 = new Slots();
  const other = activeJob(later, s2);
  decideSettle(later, { type: 'settle', generationId: other, money: 'capture', settlement: settlementOf() }, factsOf(later), s2, NOW);
  s2.free.local = 1;
  const within = decideCreate(later, requestOf(), none, factsOf(later), s2, NOW);
  t.equal(writesOf(within.effects)[0]?.lane, 'creations', 'within the plan even counting the settling slot: with the other creates');
});

t.test('refused creates change nothing and write nothing', async (t) => {
  const refusedWith = (t: Test, state: WorkspaceState, request: CreateRequest, code: string, message: RegExp) => {
    const before = { ...state.account, reservations: { ...state.account.reservations } };
    const jobs = state.jobs.count('creating') + state.jobs.count('queued');
    const slots = new Slots({ local: 1 });
    const { reply, effects } = decideCreate(state, request, none, factsOf(state), slots, NOW);
    t.equal(reply.kind, 'refused');
    t.equal(reply.kind === 'refused' && reply.code, code);
    t.match(reply.kind === 'refused' && reply.message, message);
    t.same(effects, [], 'no effect');
    t.same(state.account, before, 'the account as it was');
    t.equal(state.jobs.count('creating') + state.jobs.count('queued'), jobs, 'no job added');
    t.equal(state.jobs.get(request.id), undefined);
    t.same(slots.calls, [], 'no slot asked for');
  };

  t.test('an order the catalog served at the reservation cannot take (a reload took its model away)', async (t) => {
    const unpriced: CreateRequest = { ...requestOf(), priced: { ok: false, message: 'model: unknown model "flux"; see GET /v1/models' }, slotKey: '' };
    refusedWith(t, stateOf(), unpriced, 'validation_error', /^model: unknown model "flux"/);
  });

  t.test("a model not on the workspace's plan", async (t) => {
    refusedWith(t, stateOf(), requestOf({ modelPlans: ['team'] }), 'plan_limit_reached', /not available on the Pro plan/);
  });

  t.test('past ten times the concurrency in unfinished jobs', async (t) => {
    const state = stateOf({ plan: planOf({ concurrentJobs: 1 }), account: funded(1_000) });
    const slots = new Slots();
    for (let i = 0; i < 10; i++) queuedJob(state, slots);
    refusedWith(t, state, requestOf(), 'plan_limit_reached', /allows 10 unfinished jobs at a time \(1 running\)/);
  });

  t.test('jobs still being created count too', async (t) => {
    const state = stateOf({ plan: planOf({ concurrentJobs: 1 }), account: funded(1_000) });
    const slots = new Slots();
    for (let i = 0; i < 10; i++) decideCreate(state, requestOf(), none, factsOf(state, { paused: true }), slots, NOW);
    t.equal(state.jobs.count('creating'), 10);
    refusedWith(t, state, requestOf(), 'plan_limit_reached', /allows 10 unfinished/);
  });

  t.test('insufficient credits', async (t) => {
    refusedWith(t, stateOf({ account: funded(5) }), requestOf({ credits: 10 }), 'insufficient_credits', /costs 10 credits; 5 are available/);
  });

  t.test("the key's model list, concurrency and budget", async (t) => {
    const keyed = (key: KeySpend) => stateOf({ keys: new Map([['key_1', key]]) });
    refusedWith(t, keyed(keyOf({ allowedModels: ['sdxl'] })), requestOf({ apiKeyId: 'key_1' }), 'plan_limit_reached', /may not use model flux/);
    const busy = keyOf({ maxConcurrentGenerations: 1 });
    busy.unfinished = 1;
    refusedWith(t, keyed(busy), requestOf({ apiKeyId: 'key_1' }), 'plan_limit_reached', /allows 1 unfinished generations/);
    refusedWith(t, keyed(keyOf({ creditBudget: 15 }, 10)), requestOf({ apiKeyId: 'key_1' }), 'insufficient_credits', /credit budget of 15 has 5 left/);
  });

  t.test("a key's wallet spend cap is decided at creation", async (t) => {
    const walletState = (key: KeySpend) => stateOf({ account: walletOf(), keys: new Map([['key_1', key]]) });
    const capped = keyOf({ walletSpendCapCents: 30 });
    capped.month.walletCents = 15;
    refusedWith(
      t,
      walletState(capped),
      requestOf({ apiKeyId: 'key_1', paymentMode: 'wallet' }),
      'wallet_insufficient_balance',
      /wallet spend cap of 30 cents leaves 15/,
    );
    const roomy = keyOf({ walletSpendCapCents: 35 });
    roomy.month.walletCents = 15;
    const state = walletState(roomy);
    const { reply } = decideCreate(state, requestOf({ apiKeyId: 'key_1', paymentMode: 'wallet' }), none, factsOf(state), new Slots(), NOW);
    t.equal(reply.kind, 'created', 'within the cap: 20 cents of the 20 left');
    const keyless = stateOf({ account: walletOf() });
    t.equal(decideCreate(keyless, requestOf({ paymentMode: 'wallet' }), none, factsOf(keyless), new Slots(), NOW).reply.kind, 'created', 'no key: no key cap');
  });

  t.test('a key read from the database for this create is decided against at once, and kept', async (t) => {
    const state = stateOf();
    const read = new Map([['key_1', keyOf({ allowedModels: ['sdxl'] })]]);
    const { reply } = decideCreate(state, requestOf({ apiKeyId: 'key_1' }), { keys: read }, factsOf(state), new Slots(), NOW);
    t.equal(reply.kind === 'refused' && reply.code, 'plan_limit_reached');
    t.equal(state.keys.get('key_1'), read.get('key_1'), 'the key joins the state');
  });
});

t.test('an accepted create counts against its key, and its settlement gives back what it released', async (t) => {
  const key = keyOf({ creditBudget: 100 });
  const state = stateOf({ keys: new Map([['key_1', key]]) });
  const slots = new Slots({ local: 1 });
  const request = requestOf({ apiKeyId: 'key_1' });
  const { effects } = decideCreate(state, request, none, factsOf(state), slots, NOW);
  t.same([key.day.credits, key.month.credits, key.unfinished], [10, 10, 1], 'counted in its day and month, one more unfinished');
  t.same(
    writesOf(effects)[0]?.creation.keySpend?.map((d) => [d.period, d.credits]),
    [
      ['day', 10],
      ['month', 10],
    ],
    "the key's spend rows written with the creation",
  );
  decideCreateCommitted(state, { type: 'create_committed', generationId: request.id, schedule: false }, factsOf(state), slots);
  const settled = decideSettle(
    state,
    { type: 'settle', generationId: request.id, money: 'release', settlement: settlementOf({}, 'failed') },
    factsOf(state),
    slots,
    NOW,
  );
  t.same([key.day.credits, key.unfinished], [0, 0], 'a release gives the whole job back');
  const write = settled.effects[0] as SettlementWrite;
  t.same(
    write.settlement.keySpendDeltas?.map((d) => [d.period, d.credits]),
    [
      ['day', -10],
      ['month', -10],
    ],
  );
});

t.test('Idempotency-Keys: a stored answer replayed, another body or one in flight a conflict', async (t) => {
  const key = { key: 'idem_1', hash: 'h1' };
  const stored: IdempotencyEntry = { hash: 'h1', expiresAt: NOW + 1_000, result: { status: 201, generation: { id: 'gen_old' } as GenerationRow } };

  t.test('read from the database: replayed, and remembered', async (t) => {
    const state = stateOf();
    const { reply, effects } = decideCreate(state, requestOf({}, key), { stored: new Map([['idem_1', stored]]) }, factsOf(state), new Slots(), NOW);
    t.same(reply, { kind: 'replay', status: 201, generation: { id: 'gen_old' } });
    t.same(effects, []);
    t.equal(state.account.reservedCredits, 0, 'nothing reserved');
    t.equal(state.idempotency.get('idem_1', NOW), stored, 'kept in memory for the next retry');
  });

  t.test("a key's first answer is given again even when the catalog no longer takes its order", async (t) => {
    const state = stateOf();
    const unpriced: CreateRequest = { ...requestOf({}, key), priced: { ok: false, message: 'model: unknown model "flux"' }, slotKey: '' };
    const { reply, effects } = decideCreate(state, unpriced, { stored: new Map([['idem_1', stored]]) }, factsOf(state), new Slots(), NOW);
    t.same(reply, { kind: 'replay', status: 201, generation: { id: 'gen_old' } });
    t.same(effects, []);
  });

  t.test('another body', async (t) => {
    const state = stateOf();
    const { reply, effects } = decideCreate(
      state,
      requestOf({}, { key: 'idem_1', hash: 'h2' }),
      { stored: new Map([['idem_1', stored]]) },
      factsOf(state),
      new Slots(),
      NOW,
    );
    t.match(reply, { kind: 'refused', code: 'conflict', message: /different request body/ });
    t.same(effects, []);
  });

  t.test('the first request still being created', async (t) => {
    const state = stateOf();
    const slots = new Slots();
    const first = decideCreate(state, requestOf({}, key), none, factsOf(state), slots, NOW);
    t.equal(first.reply.kind, 'created');
    t.same(
      writesOf(first.effects)[0]?.creation.idempotency,
      { key: 'idem_1', hash: 'h1', expiresAt: new Date(NOW + IDEMPOTENCY_TTL_MS) },
      'the key written with the row',
    );
    const again = decideCreate(state, requestOf({}, key), none, factsOf(state), slots, NOW);
    t.match(again.reply, { kind: 'refused', code: 'conflict', message: /still being processed/ });
    t.same(again.effects, []);

    const msg = writesOf(first.effects)[0]!.onCommitted[0] as Extract<FollowUp, { type: 'tell_self' }>;
    decideCreateCommitted(state, msg.msg as Extract<WorkspaceMessage, { type: 'create_committed' }>, factsOf(state), slots);
    const replayed = decideCreate(state, requestOf({}, key), none, factsOf(state), slots, NOW);
    t.equal(replayed.reply.kind, 'replay', 'once committed, the same request is the first answer again');
    t.equal(replayed.reply.kind === 'replay' && replayed.reply.generation, first.reply.kind === 'created' && first.reply.generation);
  });

  t.test('a committed key answers again for a day, and no longer', async (t) => {
    const state = stateOf();
    const slots = new Slots();
    const first = decideCreate(state, requestOf({}, key), none, factsOf(state), slots, NOW);
    const msg = writesOf(first.effects)[0]!.onCommitted[0] as Extract<FollowUp, { type: 'tell_self' }>;
    decideCreateCommitted(state, msg.msg as Extract<WorkspaceMessage, { type: 'create_committed' }>, factsOf(state), slots);
    const hour = 60 * 60 * 1000;
    t.equal(decideCreate(state, requestOf({}, key), none, factsOf(state), slots, NOW + 23 * hour).reply.kind, 'replay', '23 hours later');
    t.equal(decideCreate(state, requestOf({}, key), none, factsOf(state), slots, NOW + 25 * hour).reply.kind, 'created', '25 hours later');
  });

  t.test('an expired key is free again', async (t) => {
    const state = stateOf();
    const old = { ...stored, expiresAt: NOW - 1 };
    state.idempotency.remember('idem_1', old);
    const { reply } = decideCreate(state, requestOf({}, key), none, factsOf(state), new Slots(), NOW);
    t.equal(reply.kind, 'created');
  });
});

t.test('a batch: each item as its own create, keys taken by earlier items, one schedule once all are written', async (t) => {
  const state = stateOf({ account: funded(25) });
  const slots = new Slots({ local: 1 });
  const requests = [
    requestOf({}, { key: 'a', hash: 'h' }),
    requestOf({}, { key: 'a', hash: 'h' }),
    requestOf({}, { key: 'a', hash: 'other' }),
    requestOf(),
    requestOf({ credits: 10 }),
  ];
  const { reply, effects, afterWrites } = decideCreateBatch(state, requests, none, factsOf(state), slots, NOW);
  t.same(
    reply.map((r) => (r.kind === 'refused' ? r.code : r.kind)),
    ['created', 'replay', 'conflict', 'created', 'insufficient_credits'],
  );
  const first = reply[0]!.kind === 'created' ? reply[0]!.generation : undefined;
  t.same(reply[1], { kind: 'replay', status: 201, generation: first }, 'the same request again: the first answer');
  t.equal(writesOf(effects).length, 2, 'one write per created item');
  t.equal(state.jobs.get(requests[0]!.id)?.status, 'starting', 'the first took the free slot');
  t.equal(state.jobs.get(requests[3]!.id)?.status, 'creating', 'the next queues');
  for (const write of writesOf(effects)) {
    const told = write.onCommitted.find((e) => e.type === 'tell_self');
    t.match(told, { msg: { type: 'create_committed', schedule: false } }, 'no item schedules on its own');
  }
  t.same(afterWrites, [{ type: 'tell_self', msg: { type: 'schedule' } }]);

  const refusedOnly = decideCreateBatch(stateOf({ account: funded(0) }), [requestOf()], none, factsOf(state), new Slots(), NOW);
  t.equal(refusedOnly.afterWrites, undefined, 'nothing written: nothing to schedule after');
});

t.test('the row a create writes: its key, no outputs, a timeline that starts queued', async (t) => {
  const state = stateOf();
  const request = requestOf({}, { key: 'idem_row', hash: 'h' });
  const { reply } = decideCreate(state, request, none, factsOf(state), new Slots({ local: 0 }), NOW);
  const generation = reply.kind === 'created' ? reply.generation : undefined;
  t.equal(generation?.idempotencyKey, 'idem_row');
  t.same(generation?.outputAssetIds, []);
  t.same(generation?.timeline, [{ status: 'queued', at: new Date(NOW).toISOString() }]);
  const keyless = decideCreate(state, requestOf(), none, factsOf(state), new Slots({ local: 0 }), NOW);
  t.equal(keyless.reply.kind === 'created' && keyless.reply.generation.idempotencyKey, null, 'no key: null');
});

t.test("a create reserved at creation: counted from new to queued, and started in its request's trace", async (t) => {
  const state = stateOf();
  const trace = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', requestId: 'req_1' };
  const request: CreateRequest = { ...requestOf(), trace };
  const { effects } = decideCreate(state, request, none, factsOf(state), new Slots({ local: 1 }), NOW);
  const [write] = writesOf(effects);
  t.same(write?.onCommitted[2], { type: 'count_transition', from: 'new', to: 'queued' });
  t.match(write?.onCommitted[3], { type: 'start_generation', id: request.id, trace });
  const untraced = decideCreate(stateOf(), requestOf(), none, factsOf(state), new Slots({ local: 1 }), NOW);
  t.match(writesOf(untraced.effects)[0]?.onCommitted[3], { type: 'start_generation', trace: undefined }, 'no trace: none');
});

t.test("a batch: a refused item's key stays free for a later item; a stored key is replayed; the effects in order", async (t) => {
  const state = stateOf();
  const slots = new Slots({ local: 0 });
  const refusedFirst = requestOf({ modelPlans: ['team'] }, { key: 'k', hash: 'h' });
  const admitted = requestOf({}, { key: 'k', hash: 'h' });
  const stored: IdempotencyEntry = { hash: 'hs', expiresAt: NOW + 1_000, result: { status: 201, generation: { id: 'gen_stored' } as GenerationRow } };
  const replayed = requestOf({}, { key: 'old', hash: 'hs' });
  const { reply, effects } = decideCreateBatch(state, [refusedFirst, admitted, replayed], { stored: new Map([['old', stored]]) }, factsOf(state), slots, NOW);
  t.same(
    reply.map((r) => (r.kind === 'refused' ? r.code : r.kind)),
    ['plan_limit_reached', 'created', 'replay'],
  );
  t.same(reply[2], { kind: 'replay', status: 201, generation: { id: 'gen_stored' } });
  t.same(typesOf(effects), ['arm_expiry', 'write_creation'], 'only the admitted item writes');
});

t.test('create_committed: the job joins the queue or is active; a schedule only when asked', async (t) => {
  const state = stateOf();
  const slots = new Slots({ local: 1 });
  const reserved = requestOf();
  decideCreate(state, reserved, none, factsOf(state), slots, NOW);
  const queued = requestOf();
  decideCreate(state, queued, none, factsOf(state, { paused: true }), slots, NOW);
  t.equal(state.jobs.get(reserved.id)?.status, 'starting');
  t.equal(state.jobs.get(queued.id)?.status, 'creating');

  const ofReserved = decideCreateCommitted(state, { type: 'create_committed', generationId: reserved.id, schedule: false }, factsOf(state), slots);
  t.same(typesOf(ofReserved.effects), ['money_moved'], 'a job reserved at creation has no queue deadline to watch, and nothing is scheduled');
  slots.free.local = 1;
  const calls = slots.calls.length;
  const ofQueued = decideCreateCommitted(state, { type: 'create_committed', generationId: queued.id, schedule: false }, factsOf(state), slots);
  t.same(typesOf(ofQueued.effects), ['money_moved'], 'a queued job: its deadline was watched from its create on');
  t.equal(state.expiryAt, NOW + TIMEOUT);
  t.equal(slots.calls.length, calls, 'schedule: false asks for no slot (a batch schedules once, after all its rows)');
  t.equal(state.jobs.get(queued.id)?.status, 'queued');
  const scheduled = decideCreateCommitted(state, { type: 'create_committed', generationId: 'gen_unknown', schedule: true }, factsOf(state), slots);
  t.ok(slots.calls.length > calls, 'schedule: true asks for the queued job a slot');
  t.equal(state.jobs.get(queued.id)?.status, 'active', 'and starts it');
  t.ok(scheduled.effects.length > 1, 'with effects beyond the money moved');
});

t.test('a capture: its credits spent, its slot freed and the next queued job started', async (t) => {
  const state = stateOf({ plan: planOf({ concurrentJobs: 1 }) });
  const slots = new Slots();
  const running = activeJob(state, slots);
  const waiting = queuedJob(state, slots);
  t.same([state.account.availableCredits, state.account.reservedCredits], [80, 20]);

  const { reply, effects } = decideSettle(
    state,
    { type: 'settle', generationId: running, money: 'capture', settlement: settlementOf() },
    factsOf(state),
    slots,
    NOW + 5_000,
  );
  t.same(reply, { settled: true, credits: 10 });
  t.same([state.account.availableCredits, state.account.reservedCredits], [80, 10], 'the reservation spent');
  t.equal(state.jobs.get(running)?.status, 'settling', 'it stays, settling, until its settlement commits');
  t.equal(state.jobs.get(waiting)?.status, 'active', 'the queued job took the slot');
  t.same(slots.calls.slice(-2), [`release ${running}`, `tryAcquire local ${waiting} ${WS} 3`], 'its provider slot released before the next is asked for');
  t.same(typesOf(effects), ['write_settlement', 'start_generation']);
  const write = effects[0] as SettlementWrite;
  t.same(write.settlement.money.entries, [
    { kind: 'capture', generationId: running, credits: 0, reservedCredits: -10, walletCents: 0, reservedWalletCents: 0 },
  ]);
  t.equal(write.settlement.updatedAt.getTime(), NOW + 5_000);
  t.equal(write.progress, undefined);
  t.same(write.onCommitted, [{ type: 'tell_self', msg: { type: 'settle_committed', generationId: running } }, { type: 'money_moved' }]);
  t.match(effects[1], { type: 'start_generation', id: waiting, msg: { type: 'reserve', row: { id: waiting, status: 'queued' } } });
});

t.test('a release: the credits back; a job that held no slot leaves at once', async (t) => {
  const state = stateOf();
  const slots = new Slots();
  const queued = queuedJob(state, slots);
  const { reply, effects } = decideSettle(
    state,
    { type: 'settle', generationId: queued, money: 'release', settlement: settlementOf({}, 'cancelled') },
    factsOf(state),
    slots,
    NOW,
  );
  t.same(reply, { settled: true, credits: 0 });
  t.same([state.account.availableCredits, state.account.reservedCredits], [100, 0]);
  t.equal(state.jobs.get(queued), undefined);
  const write = effects[0] as SettlementWrite;
  t.same(write.onCommitted, [{ type: 'money_moved' }], 'no settle_committed: it freed no slot');
  t.same(
    write.settlement.money.entries.map((e) => [e.kind, e.credits, e.reservedCredits]),
    [['release', 10, -10]],
  );
});

t.test('a token-priced capture: charged what it used, its carry taken in, the rest released', async (t) => {
  // 1.5 credits per 1,000 input tokens and 0.25 per 1,000 output.
  const terms: TokenTerms = { inputMicroPer1k: 1_500_000, outputMicroPer1k: 250_000 };
  const state = stateOf({ plan: planOf({ concurrentJobs: 3 }) });
  state.account.tokenCarryNano = 400_000_000n;
  const slots = new Slots();
  const job = activeJob(state, slots, { tokenTerms: terms, credits: 10 });
  const usage = { inputTokens: 1_000, outputTokens: 1_000 };
  const asked = settlementOf({ tokenTerms: terms, credits: 10, usage });
  const { reply, effects } = decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: asked }, factsOf(state), slots, NOW);
  // 1.75 used + 0.4 carried = 2.15: 2 charged, 0.15 carried on.
  t.same(reply, { settled: true, credits: 2 });
  t.equal(state.account.tokenCarryNano, 150_000_000n);
  t.same([state.account.availableCredits, state.account.reservedCredits], [98, 0]);
  const write = effects[0] as SettlementWrite;
  t.equal(write.settlement.settlement.generation.credits, 2, 'the settlement written with what was charged');
  t.equal(asked.generation.credits, 10, 'the message left as it was');
  t.same(write.settlement.charge, { exactNano: '1750000000', carryBeforeNano: '400000000', carryAfterNano: '150000000', capped: false });
  t.equal(write.settlement.money.tokenCarryNano, -250_000_000, "the carry's change written with the money");
  t.same(
    write.settlement.money.entries.map((e) => [e.kind, e.credits, e.reservedCredits]),
    [
      ['capture', 0, -2],
      ['release', 8, -8],
    ],
  );
});

t.test('a job settled twice: the second moves no money (its write then fails, the row being ended)', async (t) => {
  const state = stateOf();
  const slots = new Slots();
  const job = activeJob(state, slots);
  decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: settlementOf() }, factsOf(state), slots, NOW);
  const account = { ...state.account };
  const again = decideSettle(
    state,
    { type: 'settle', generationId: job, money: 'release', settlement: settlementOf({}, 'failed') },
    factsOf(state),
    slots,
    NOW,
  );
  t.same(state.account, account, 'the account as it was');
  const write = again.effects[0] as SettlementWrite;
  t.same(write.settlement.money.entries, []);
  t.same(write.settlement.keySpendDeltas, []);
  t.equal(state.jobs.get(job)?.status, 'settling', "the first settlement's entry stays");
});

t.test('a token-priced job settled twice: the second moves no money, keeps the carry and claims no charge', async (t) => {
  const terms: TokenTerms = { inputMicroPer1k: 1_500_000, outputMicroPer1k: 250_000 };
  const state = stateOf();
  const slots = new Slots();
  const job = activeJob(state, slots, { tokenTerms: terms, credits: 10 });
  const asked = settlementOf({ tokenTerms: terms, credits: 10, usage: { inputTokens: 1_000, outputTokens: 1_000 } });
  decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: asked }, factsOf(state), slots, NOW);
  t.equal(state.account.tokenCarryNano, 750_000_000n, '1.75 used: 1 charged, 0.75 carried');
  const again = decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: asked }, factsOf(state), slots, NOW);
  t.equal(state.account.tokenCarryNano, 750_000_000n, 'the carry as the first settlement left it');
  t.same([state.account.availableCredits, state.account.reservedCredits], [99, 0]);
  const write = again.effects[0] as SettlementWrite;
  t.same(write.settlement.money.entries, []);
  t.equal(write.settlement.money.tokenCarryNano, 0, 'no change of the carry written');
  t.equal(write.settlement.charge, undefined, 'no charge recorded for a settlement that moved no money');
});

t.test('a token-priced job that reported no usage: charged its carry only, the rest released', async (t) => {
  const terms: TokenTerms = { inputMicroPer1k: 1_500_000, outputMicroPer1k: 250_000 };
  const state = stateOf();
  const slots = new Slots();
  const job = activeJob(state, slots, { tokenTerms: terms, credits: 10 });
  const asked = settlementOf({ tokenTerms: terms, credits: 10, usage: null }, 'failed');
  const { reply, effects } = decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: asked }, factsOf(state), slots, NOW);
  t.same(reply, { settled: true, credits: 0 });
  t.same([state.account.availableCredits, state.account.reservedCredits], [100, 0]);
  t.equal((effects[0] as SettlementWrite).settlement.charge?.exactNano, '0', 'nothing used');
});

t.test("a token-priced capture's terminal event carries what was charged", async (t) => {
  const terms: TokenTerms = { inputMicroPer1k: 1_500_000, outputMicroPer1k: 250_000 };
  const state = stateOf();
  const slots = new Slots();
  const job = activeJob(state, slots, { tokenTerms: terms, credits: 10 });
  const event = { generation: { id: job, workspaceId: WS, credits: 10 } as GenerationRow, status: 'succeeded' as const, at: NOW };
  const asked = { ...settlementOf({ tokenTerms: terms, credits: 10, usage: { inputTokens: 1_000, outputTokens: 1_000 } }), event };
  const { effects } = decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: asked }, factsOf(state), slots, NOW);
  const written = (effects[0] as SettlementWrite).settlement.settlement.event;
  t.match(written, { status: 'succeeded', at: NOW, generation: { id: job, workspaceId: WS, credits: 1 } }, 'its webhook says 1 credit, not the 10 reserved');
  t.equal(event.generation.credits, 10, 'the message left as it was');
});

t.test('a token-priced capture on an API key gives back to the key what it released', async (t) => {
  const terms: TokenTerms = { inputMicroPer1k: 1_500_000, outputMicroPer1k: 250_000 };
  const key = keyOf({ creditBudget: 100 });
  const state = stateOf({ keys: new Map([['key_1', key]]) });
  const slots = new Slots();
  const job = activeJob(state, slots, { tokenTerms: terms, credits: 10, apiKeyId: 'key_1' });
  t.same([key.day.credits, key.month.credits], [10, 10]);
  const asked = settlementOf({ tokenTerms: terms, credits: 10, apiKeyId: 'key_1', usage: { inputTokens: 1_000, outputTokens: 1_000 } });
  const { effects } = decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: asked }, factsOf(state), slots, NOW);
  t.same([key.day.credits, key.month.credits, key.unfinished], [1, 1, 0], 'the key keeps the 1 credit charged');
  t.same(
    (effects[0] as SettlementWrite).settlement.keySpendDeltas?.map((d) => [d.period, d.credits]),
    [
      ['day', -9],
      ['month', -9],
    ],
  );
});

t.test('a token-priced job released: all its credits back, whatever it used', async (t) => {
  const terms: TokenTerms = { inputMicroPer1k: 1_500_000, outputMicroPer1k: 250_000 };
  const state = stateOf();
  state.account.tokenCarryNano = 400_000_000n;
  const slots = new Slots();
  const job = activeJob(state, slots, { tokenTerms: terms, credits: 10 });
  const asked = settlementOf({ tokenTerms: terms, credits: 10, usage: { inputTokens: 1_000, outputTokens: 1_000 } }, 'failed');
  const { reply, effects } = decideSettle(state, { type: 'settle', generationId: job, money: 'release', settlement: asked }, factsOf(state), slots, NOW);
  t.same(reply, { settled: true, credits: 0 });
  t.same([state.account.availableCredits, state.account.reservedCredits], [100, 0]);
  t.equal(state.account.tokenCarryNano, 400_000_000n, 'the carry as it was');
  t.equal((effects[0] as SettlementWrite).settlement.charge, undefined, 'no charge');
});

t.test('a wallet-paid token-priced capture on an API key gives back to the key the wallet cents it released', async (t) => {
  const terms: TokenTerms = { inputMicroPer1k: 1_500_000, outputMicroPer1k: 250_000 };
  const key = keyOf({ creditBudget: 100 });
  const account = walletOf();
  const state = stateOf({ account, keys: new Map([['key_1', key]]) });
  const slots = new Slots();
  const job = activeJob(state, slots, { tokenTerms: terms, credits: 10, apiKeyId: 'key_1', paymentMode: 'wallet' });
  t.same([key.day.walletCents, key.month.walletCents], [20, 20], '10 credits at 2 cents reserved from the wallet');
  const asked = settlementOf({ tokenTerms: terms, credits: 10, apiKeyId: 'key_1', usage: { inputTokens: 1_000, outputTokens: 1_000 } });
  const { effects } = decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: asked }, factsOf(state), slots, NOW);
  t.same([key.day.walletCents, key.month.walletCents], [2, 2], 'the key keeps the 1 credit charged, 2 cents');
  t.same(
    (effects[0] as SettlementWrite).settlement.keySpendDeltas?.map((d) => [d.period, d.credits, d.walletCents]),
    [
      ['day', -9, -18],
      ['month', -9, -18],
    ],
  );
});

t.test('a job priced in credits leaves the token carry as it was', async (t) => {
  const state = stateOf();
  state.account.tokenCarryNano = 400_000_000n;
  const slots = new Slots();
  const job = activeJob(state, slots);
  const { effects } = decideSettle(state, { type: 'settle', generationId: job, money: 'capture', settlement: settlementOf() }, factsOf(state), slots, NOW);
  t.equal(state.account.tokenCarryNano, 400_000_000n);
  t.equal((effects[0] as SettlementWrite).settlement.money.tokenCarryNano, 0);
});

t.test("a wallet-paid job released: its cents leave the month's wallet spend", async (t) => {
  const account = walletOf();
  const state = stateOf({ account });
  const slots = new Slots();
  const job = queuedJob(state, slots, { paymentMode: 'wallet', credits: 10 });
  t.equal(state.spend.spentCents, 20, 'the reservation counted');
  decideSettle(state, { type: 'settle', generationId: job, money: 'release', settlement: settlementOf({}, 'cancelled') }, factsOf(state), slots, NOW);
  t.same(state.spend, { month: '2026-01', spentCents: 0 });
  t.same([state.account.walletCents, state.account.reservedWalletCents], [1_000, 0]);
});

t.test('a settle for a job the workspace no longer has: nothing moves, nothing to wait for', async (t) => {
  const state = stateOf();
  const slots = new Slots();
  const job = queuedJob(state, slots);
  decideSettle(state, { type: 'settle', generationId: job, money: 'release', settlement: settlementOf({}, 'cancelled') }, factsOf(state), slots, NOW);
  t.equal(state.jobs.get(job), undefined);
  const account = { ...state.account };
  const again = decideSettle(
    state,
    { type: 'settle', generationId: job, money: 'release', settlement: settlementOf({}, 'cancelled') },
    factsOf(state),
    slots,
    NOW,
  );
  t.same(state.account, account);
  t.same((again.effects[0] as SettlementWrite).onCommitted, [{ type: 'money_moved' }], 'no settle_committed: it freed no slot');
});

t.test('settle_committed removes a settling job only', async (t) => {
  const state = stateOf();
  const slots = new Slots();
  const running = activeJob(state, slots);
  t.same(decideSettleCommitted(state, running), { state, reply: undefined, effects: [] });
  t.equal(state.jobs.get(running)?.status, 'active', 'a job not settling stays');
  t.same(decideSettleCommitted(state, 'gen_unknown').effects, [], 'one the workspace does not have: nothing');
  t.equal(state.jobs.holdingSlots, 1);
});

t.test('schedule: oldest first, a full provider keeps its place, held jobs let go first', async (t) => {
  const state = stateOf({ plan: planOf({ concurrentJobs: 2 }) });
  const slots = new Slots({ busy: 0, local: 0 });
  const first = queuedJob(state, slots, {}, 'busy');
  const second = queuedJob(state, slots, {}, 'local', NOW + 1);
  const third = queuedJob(state, slots, {}, 'local', NOW + 2);

  t.test('paused, or the shard handed over: nothing starts, nothing is asked', async (t) => {
    slots.free.local = 2;
    for (const facts of [{ paused: true }, { handingOver: true }]) {
      slots.calls.length = 0;
      const { effects } = decideSchedule(state, factsOf(state, facts), slots);
      t.same(effects, [], JSON.stringify(facts));
      t.same(slots.calls, []);
    }
    slots.free.local = 0;
  });

  t.test('a full provider: its job keeps its place, the ones behind it start', async (t) => {
    slots.free.local = 2;
    slots.calls.length = 0;
    const { effects } = decideSchedule(state, factsOf(state), slots);
    t.same(slots.calls, [`tryAcquire busy ${first} ${WS} 3`, `tryAcquire local ${second} ${WS} 3`, `tryAcquire local ${third} ${WS} 3`]);
    t.same(
      effects.map((e) => e.type === 'start_generation' && e.id),
      [second, third],
    );
    t.equal(state.jobs.get(first)?.status, 'queued');
    t.equal(state.jobs.holdingSlots, 2);
  });

  t.test("the plan's concurrency reached: no more is asked", async (t) => {
    slots.free.busy = 1;
    slots.calls.length = 0;
    t.same(decideSchedule(state, factsOf(state), slots).effects, []);
    t.same(slots.calls, []);
  });

  t.test('a job recovered during a pause is held, and let go by the first schedule after it', async (t) => {
    const held = stateOf();
    const s = new Slots();
    const job = activeJob(held, s);
    const during = decideHoldRecovered(held, job, factsOf(held, { paused: true }), s);
    t.equal(held.jobs.get(job)?.status, 'held');
    t.same(during.effects, []);
    const after = decideSchedule(held, factsOf(held), s);
    t.same(after.effects, [{ type: 'tell_generation', id: job, msg: { type: 'recover' } }]);
    t.equal(held.jobs.get(job)?.status, 'active');
  });

  t.test('only held jobs are let go: the others are not told to recover', async (t) => {
    const s = stateOf();
    const p = new Slots();
    const job = activeJob(s, p);
    const other = activeJob(s, p);
    decideHoldRecovered(s, job, factsOf(s, { paused: true }), p);
    const waiting = queuedJob(s, p);
    const { effects } = decideSchedule(s, factsOf(s), p);
    t.same(effects, [{ type: 'tell_generation', id: job, msg: { type: 'recover' } }]);
    t.same([s.jobs.get(waiting)?.status, s.jobs.get(other)?.status], ['queued', 'active']);
  });

  t.test("the plan's concurrency reached during a schedule: the jobs behind wait, their providers not asked", async (t) => {
    const s = stateOf({ plan: planOf({ concurrentJobs: 1 }) });
    const p = new Slots({ local: 0 });
    const a = queuedJob(s, p);
    const b = queuedJob(s, p);
    p.free.local = 2;
    p.calls.length = 0;
    const { effects } = decideSchedule(s, factsOf(s), p);
    t.same(
      effects.map((e) => e.type === 'start_generation' && e.id),
      [a],
    );
    t.equal(s.jobs.get(b)?.status, 'queued');
    t.same(p.calls, [`tryAcquire local ${a} ${WS} 3`]);
  });

  t.test('a declined slot goes back and the queue moves', async (t) => {
    const s = stateOf({ plan: planOf({ concurrentJobs: 1 }) });
    const p = new Slots();
    const running = activeJob(s, p);
    const next = queuedJob(s, p);
    const { effects } = decideSlotDeclined(s, running, factsOf(s), p);
    t.equal(s.jobs.get(running)?.status, 'declined');
    t.ok(p.calls.includes(`release ${running}`));
    t.same(
      effects.map((e) => e.type === 'start_generation' && e.id),
      [next],
    );
  });

  t.test("the catalog's current plan is the one decided with", async (t) => {
    const s = stateOf({ plan: planOf({ concurrentJobs: 1 }) });
    const p = new Slots({ local: 2 });
    const a = queuedJob(s, p);
    const b = queuedJob(s, p);
    const { effects } = decideSchedule(s, factsOf(s, { plan: planOf({ concurrentJobs: 2 }) }), p);
    t.same(
      effects.map((e) => e.type === 'start_generation' && e.id),
      [a, b],
    );
    t.equal(s.plan.concurrentJobs, 2);
  });
});

t.test('create_committed and create_failed', async (t) => {
  t.test('a queued job joins the queue, its deadline watched, its key remembered, and schedules when asked', async (t) => {
    const state = stateOf();
    const slots = new Slots({ local: 0 });
    const request = requestOf({}, { key: 'k', hash: 'h' });
    const created = decideCreate(state, request, none, factsOf(state), slots, NOW);
    state.expiryAt = undefined;
    slots.free.local = 1;
    const told = (writesOf(created.effects)[0]!.onCommitted[0] as Extract<FollowUp, { type: 'tell_self' }>).msg as Extract<
      WorkspaceMessage,
      { type: 'create_committed' }
    >;
    const { effects } = decideCreateCommitted(state, told, factsOf(state), slots);
    t.same(typesOf(effects), ['arm_expiry', 'money_moved', 'start_generation'], 'watched, the budget looked at, then scheduled: it starts');
    t.equal(state.jobs.get(request.id)?.status, 'active');
    t.match(state.idempotency.get('k', NOW), { hash: 'h', result: { status: 201 } });
  });

  t.test('a job reserved at creation is active; one reloaded since is left as it is', async (t) => {
    const state = stateOf();
    const slots = new Slots({ local: 1 });
    const request = requestOf();
    decideCreate(state, request, none, factsOf(state), slots, NOW);
    const { effects } = decideCreateCommitted(state, { type: 'create_committed', generationId: request.id, schedule: false }, factsOf(state), slots);
    t.equal(state.jobs.get(request.id)?.status, 'active');
    t.same(effects, [{ type: 'money_moved' }]);
    const gone = decideCreateCommitted(state, { type: 'create_committed', generationId: 'gen_unknown', schedule: false }, factsOf(state), slots);
    t.same(gone.effects, [{ type: 'money_moved' }]);
  });

  t.test('a job loaded since its create (the state reloaded) is left as it was: no timer, no key remembered', async (t) => {
    const state = stateOf();
    const slots = new Slots();
    state.jobs.put(loadedJob({ id: 'gen_loaded', status: 'queued', slotKey: 'local', queueDeadline: NOW + 5_000 }));
    const before = state.jobs.get('gen_loaded');
    const entry: IdempotencyEntry = { hash: 'h', expiresAt: NOW + IDEMPOTENCY_TTL_MS, result: { status: 201, generation: {} as GenerationRow } };
    const { effects } = decideCreateCommitted(
      state,
      { type: 'create_committed', generationId: 'gen_loaded', idempotency: { key: 'k', entry }, schedule: false },
      factsOf(state),
      slots,
    );
    t.same(effects, [{ type: 'money_moved' }]);
    t.equal(state.jobs.get('gen_loaded'), before);
    t.equal(state.expiryAt, undefined);
    t.equal(state.idempotency.get('k', NOW), undefined);
  });

  t.test('a job reserved at creation has no deadline: the queue timer already armed is left alone', async (t) => {
    const reserved = stateOf();
    const s2 = new Slots({ local: 1 });
    queuedJob(reserved, s2, {}, 'busy');
    t.equal(reserved.expiryAt, NOW + TIMEOUT);
    const r2 = requestOf();
    reserved.jobs.put({ id: r2.id, status: 'starting', slotKey: 'local' });
    const { effects } = decideCreateCommitted(reserved, { type: 'create_committed', generationId: r2.id, schedule: false }, factsOf(reserved), s2);
    t.equal(reserved.jobs.get(r2.id)?.status, 'active');
    t.same(effects, [{ type: 'money_moved' }], 'no timer armed again');
  });

  t.test('create_failed leaves a job that is not being reserved at creation', async (t) => {
    const state = stateOf();
    const slots = new Slots();
    const waiting = queuedJob(state, slots);
    decideCreateFailed(state, waiting, factsOf(state, { paused: true }), slots);
    t.equal(state.jobs.get(waiting)?.status, 'queued');
    t.same(decideCreateFailed(state, 'gen_unknown', factsOf(state, { paused: true }), slots).effects, []);
    t.equal(state.jobs.count('queued'), 1);
  });

  t.test('a failed reserved creation gives its slot back to the queue', async (t) => {
    const state = stateOf({ plan: planOf({ concurrentJobs: 1 }) });
    const slots = new Slots({ local: 1 });
    const request = requestOf();
    decideCreate(state, request, none, factsOf(state), slots, NOW);
    const waiting = queuedJob(state, slots);
    const { effects } = decideCreateFailed(state, request.id, factsOf(state), slots);
    t.equal(state.jobs.get(request.id), undefined);
    t.ok(slots.calls.includes(`release ${request.id}`));
    t.same(
      effects.map((e) => e.type === 'start_generation' && e.id),
      [waiting],
    );
  });
});

t.test('expiry: one timer for the earliest deadline; due jobs told to expire, the timer moved on', async (t) => {
  const state = stateOf();
  const slots = new Slots();
  const early = queuedJob(state, slots, {}, 'local', NOW);
  const late = queuedJob(state, slots, {}, 'local', NOW + 60_000);
  t.equal(state.expiryAt, NOW + TIMEOUT, 'armed for the earliest');

  const notYet = decideExpireQueued(state, NOW + TIMEOUT - 1);
  t.same(notYet.effects, [{ type: 'cancel_expiry' }, { type: 'arm_expiry', at: NOW + TIMEOUT }], 'early: nothing expires, armed again');

  const { effects } = decideExpireQueued(state, NOW + TIMEOUT);
  t.same(effects, [
    { type: 'cancel_expiry' },
    { type: 'tell_generation', id: early, msg: { type: 'expire' } },
    { type: 'arm_expiry', at: NOW + 60_000 + TIMEOUT },
  ]);
  t.equal(state.jobs.get(early)?.status, 'queued', 'it keeps its place until it settles');
  t.equal(state.jobs.get(early)?.deadline, undefined, 'its deadline no longer watched');
  t.equal(state.expiryAt, NOW + 60_000 + TIMEOUT);

  const same = decideCreate(state, requestOf(), none, factsOf(state, { paused: true }), slots, NOW + 60_000);
  t.notOk(
    same.effects.some((e) => e.type === 'arm_expiry'),
    'a deadline the timer is armed for already arms nothing',
  );
  const sameId = writesOf(same.effects)[0]!.creation.generation.id;
  decideCreateCommitted(state, { type: 'create_committed', generationId: sameId, schedule: false }, factsOf(state, { paused: true }), slots);

  const last = decideExpireQueued(state, NOW + 60_000 + TIMEOUT);
  t.same(last.effects, [
    { type: 'cancel_expiry' },
    { type: 'tell_generation', id: late, msg: { type: 'expire' } },
    { type: 'tell_generation', id: sameId, msg: { type: 'expire' } },
  ]);
  t.equal(state.expiryAt, undefined, 'no queued job left: no timer');

  const loaded = stateOf();
  loaded.jobs.put(loadedJob({ id: 'gen_a', status: 'queued', slotKey: 'local', queueDeadline: NOW + 10 }));
  loaded.jobs.put(loadedJob({ id: 'gen_b', status: 'running', slotKey: 'local', queueDeadline: NOW + 1 }));
  t.same(decideLoaded(loaded).effects, [{ type: 'arm_expiry', at: NOW + 10 }], 'a loaded state watches its queued jobs only');
  t.same(decideLoaded(stateOf()).effects, [], 'none queued: no timer');
});

t.test('an auto-recharge starts when a create leaves the wallet under its threshold, one at a time', async (t) => {
  const account = walletOf();
  const state = stateOf({ account, wallet: { autoRecharge: { enabled: true, thresholdCents: 990, amountCents: 5_000 }, monthlySpendCapCents: null } });
  const slots = new Slots();
  const first = decideCreate(state, requestOf({ paymentMode: 'wallet', credits: 10 }), none, factsOf(state), slots, NOW);
  t.same(first.effects[0], { type: 'tell_self', msg: { type: 'auto_recharge' } });
  t.equal(state.recharging, true);
  t.equal(state.spend.spentCents, 20, "the wallet's monthly spend counts the reservation");
  const second = decideCreate(state, requestOf({ paymentMode: 'wallet', credits: 10 }), none, factsOf(state), slots, NOW);
  t.notOk(
    second.effects.some((e) => e.type === 'tell_self'),
    'not again while one is under way',
  );
});

t.test("key limits: the key's controls changed and written; key usage read", async (t) => {
  const key = keyOf({}, 7);
  const state = stateOf({ keys: new Map([['key_1', key]]) });
  const { reply, effects } = decideKeyLimits(state, 'key_1', { creditBudget: 50 }, undefined, NOW);
  t.same(reply, { found: true, limits: { ...noKeyLimits(), creditBudget: 50 } });
  t.same(effects, [{ type: 'write_key_limits', keyId: 'key_1', limits: { ...noKeyLimits(), creditBudget: 50 }, at: NOW }]);
  t.equal(key.limits.creditBudget, 50, 'in force for the next create');
  t.same(decideKeyLimits(state, 'key_2', { creditBudget: 1 }, undefined, NOW), { state, reply: { found: false }, effects: [] });

  const read = decideKeyUsage(state, 'key_3', new Map([['key_3', keyOf({}, 3)]]), NOW);
  t.equal(read.reply.found, true, 'a key read for the message is answered and kept');
  t.ok(state.keys.has('key_3'));
  t.same(read.effects, []);
});
