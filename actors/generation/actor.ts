import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Outcome } from '../../runtime/actor-behavior.ts';
import type { MessageOf, NoReply, ReplyTo } from '../../runtime/actor-protocol.ts';
import type { ActorContext, ActorKinds, KindBehavior } from '../kinds.ts';
import { serviceTracer } from '../../runtime/tracing.ts';
import type { Timer } from '../../runtime/clock.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { findGeneration } from '../../persistence/stores/generations/progress.ts';
import { DatabaseUnavailableError, isDatabaseUnreachable, untilReachable } from '../../persistence/availability.ts';
import { depsOf } from '../deps.ts';
import type { NewAsset } from '../../persistence/assets/store.ts';
import type { Mode } from '../../domain/catalog/models.ts';
import { inputTokenBound } from '../../domain/catalog/pricing.ts';
import { chooseDeployment, isRetriable, withinBudget, jobNeedsOf } from '../../domain/catalog/routing.ts';
import type { DeploymentRecord } from '../../domain/catalog/index.ts';
import { InputError } from './input-resolver.ts';
import { OutputsOverStorageLimitError } from './blob-outputs.ts';
import type { PreparedOutputs } from './output-store.ts';
import type { CancelReply, GenerationMessage, GenerationProtocol } from './protocol.ts';
import type { ProviderJob, ProviderUpdate } from '../../providers/provider.ts';
import { ProviderFailure } from '../../providers/adapter.ts';
import { upstreamInput } from '../../domain/catalog/input-mapping.ts';
import { writeProgressOf, type Progress } from './progress-writes.ts';
import { decide, MAX_ATTEMPTS, type GenerationCommand, type GenerationEffect } from './machine.ts';
import { isTerminal, type TerminalStatus } from '../../domain/generation-status.ts';
import { storableText } from '../../persistence/storable-text.ts';
import { currentTraceparent } from '../../runtime/trace-context.ts';
import { countUsage } from '../../providers/token-count.ts';
import { StreamedText } from './streamed-text.ts';

/** What the workspace's `settle` carries, read through the protocol map: the workspace kind sits above this one (docs/architecture.md). */
type GenerationSettlement = Extract<MessageOf<ActorKinds['ws']>, { type: 'settle' }>['settlement'];

/**
 * How long a terminal transition waits for its workspace actor: as long as a timer can (about 24 days). The
 * settlement is answered once it commits, and the writer keeps trying while the database is unreachable, so
 * a shorter wait would only give up on a settlement that still commits later.
 */
const SETTLE_WAIT_MS = 2_147_483_647;

export interface GenerationActorState {
  /** Undefined when no such generation exists. */
  row: GenerationRow | undefined;
  timer?: Timer;
  /** Ends the provider span of the attempt in flight, if it has not ended (the job ended without its provider's last word). */
  endProviderSpan?: (outcome: TerminalStatus, errorCode?: string) => void;
  /** The text the attempt in flight streamed so far. */
  streamed?: StreamedText;
  /** Transitions not written yet, riding with the next write (RIDE_MS); absent when every transition is written. */
  riding?: Riding;
  /** Since when the job waits for an open breaker (PROVIDER_BREAKER_WAIT_MS bounds the wait). */
  breakerWaitSince?: number;
}

/**
 * Submitted, running and notes of a job whose provider answers within its request (OpenAI, local): they
 * protect nothing a restart could use, so they cost no commit of their own. They are written with the job's
 * next write (its settlement, in the same group commit, when the answer comes first), or after RIDE_MS when
 * the job is still running then (so that a long answer shows as running and sends generation.started).
 */
interface Riding {
  /** The status last written (the stored row's): the write moves the row from it. */
  from: GenerationRow['status'];
  /** Each transition's row, in order: published once written. */
  rows: GenerationRow[];
  traceParent: string | null;
  timer: Timer;
}

/** How long a job of a provider that answers within its request may run before its transitions are written. */
export const RIDE_MS = 100;

/**
 * The ride's wait is the writer's batching, as the group commit's is, not a time of the job's own (a deadline,
 * a retry): it runs on real time, whatever clock the service was given, so that a test's manual clock never
 * holds a write back.
 */
function rideTimer(write: () => void): Timer {
  const handle = setTimeout(write, RIDE_MS);
  handle.unref();
  return { cancel: () => clearTimeout(handle) };
}

/**
 * One generation's lifecycle: loads its row, asks `decide` what each message means, persists the
 * transition, and performs the effects. Terminal transitions are written by the workspace actor in the
 * same transaction as the capture or release of the generation's credits.
 */
export const generationActor: KindBehavior<'gen', GenerationActorState> = {
  kind: 'gen',

  async load(ctx) {
    return { row: await findGeneration(ctx.db, ctx.id) };
  },

  seed: (msg) => ((msg.type === 'reserve' || msg.type === 'recover' || msg.type === 'start') && msg.row ? { row: msg.row } : undefined),

  workspaceOf: (state) => state.row?.workspaceId,

  // Transitions riding are in this actor alone until written: it is not stopped for idleness meanwhile.
  keepAlive: (state) => state.riding !== undefined,

  handlers: {
    recover: live((state, row, _msg, ctx) => recover(state, row, ctx)),
    reserve: live(async (state, row, _msg, ctx) => {
      // A shard being handed over starts nothing more: a slot granted just before the drain began goes back,
      // and the job stays queued for the next owner (which would otherwise hand it to its provider again).
      if (depsOf(ctx).handingOver?.(row.workspaceId)) {
        ctx.actors.tell('ws', row.workspaceId, { type: 'slot_declined', generationId: row.id });
        return { state };
      }
      const outcome = await transition(state, row, { type: 'reserve' }, ctx);
      if (!outcome.applied) ctx.actors.tell('ws', row.workspaceId, { type: 'slot_declined', generationId: row.id });
      return outcome.result;
    }),
    start: live((state, row, _msg, ctx) => start(state, row, ctx)),
    cancel: async (state, msg, ctx) => {
      const row = state.row;
      if (!row) return { state, reply: { kind: 'not_found' }, passivate: true };
      if (isTerminal(row.status)) {
        ended(state, row, msg, ctx);
        return { state, passivate: true, reply: { kind: 'conflict', status: row.status } };
      }
      // A job that streamed part of its answer is charged for it (docs/openai-compatible.md, Billing).
      const streamed = state.streamed?.started && (row.status === 'submitted' || row.status === 'running') ? state.streamed : undefined;
      const charged = streamed ? await chargedRow(row, streamed, undefined, ctx) : { row, charge: false };
      const outcome = await transition(state, charged.row, { type: 'cancel', by: msg.by, charge: charged.charge }, ctx);
      if (outcome.applied) depsOf(ctx).held?.release(row.id);
      const reply: CancelReply = outcome.applied ? { kind: 'cancelled', generation: state.row! } : { kind: 'conflict', status: state.row!.status };
      return { state: outcome.result.state, ...(outcome.result.passivate ? { passivate: true } : {}), reply };
    },
    expire: live(async (state, row, _msg, ctx) => {
      const outcome = await transition(state, row, { type: 'expire' }, ctx);
      if (!outcome.applied && row.status === 'queued') armQueueTimer(state, row, ctx);
      return outcome.result;
    }),
    submitted: live(async (state, row, msg, ctx) => (await transition(state, row, { type: 'submitted', providerJobId: msg.providerJobId }, ctx)).result),
    submit_failed: live((state, row, msg, ctx) => failOrReroute(state, row, msg.errorCode, msg.errorMessage, ctx)),
    provider_update: live((state, row, msg, ctx) => providerUpdate(state, row, msg.update, ctx)),
    breaker_open: live((state, row, msg, ctx) => breakerOpen(state, row, msg.deploymentId, msg.retryAt, ctx, msg.reason ?? 'breaker')),
    write_riding: live((state, _row, _msg, ctx) => {
      writeRiding(state, ctx);
      return { state };
    }),
    retry_submit: live((state, row, _msg, ctx) => {
      if (row.status === 'reserved' || row.status === 'submitted' || row.status === 'running') {
        if (row.providerJobId === null) submit(state, row, ctx);
      }
      return { state };
    }),
    provider_event: live((state, row, msg, ctx) => {
      // Only for the job its provider runs under that id now; the adapter following it reports what it means. A
      // provider that runs the job under our own id (Cog) may send its first event before that id is written.
      const ours = row.providerJobId === msg.providerJobId || (row.providerJobId === null && (msg.providerJobId === row.id || msg.jobId === row.id));
      if (ours) depsOf(ctx).providers.forJob(row)?.deliverEvent?.(msg.providerJobId, msg.payload, msg.jobId);
      return { state };
    }),
  },
};

type NoReplyType = { [T in GenerationMessage['type']]: ReplyTo<GenerationProtocol, T> extends NoReply ? T : never }[GenerationMessage['type']];
type Answer = Outcome<GenerationActorState, NoReply> | Promise<Outcome<GenerationActorState, NoReply>>;

/**
 * The handler of a message that answers nothing, for a job still under way: with no row (a job that does not
 * exist) or a job that has ended, the message is dropped (ended, below) and the actor stops.
 */
function live<T extends NoReplyType>(
  handler: (state: GenerationActorState, row: GenerationRow, msg: Extract<GenerationMessage, { type: T }>, ctx: ActorContext) => Answer,
): (state: GenerationActorState, msg: Extract<GenerationMessage, { type: T }>, ctx: ActorContext) => Answer {
  return (state, msg, ctx) => {
    const row = state.row;
    if (!row) return { state, passivate: true };
    if (isTerminal(row.status)) return ended(state, row, msg, ctx);
    return handler(state, row, msg, ctx);
  };
}

/** A message to a job that has ended: what it still asks of the others is undone, and the actor stops. */
function ended(state: GenerationActorState, row: GenerationRow, msg: GenerationMessage, ctx: ActorContext): Outcome<GenerationActorState, NoReply> {
  depsOf(ctx).held?.release(row.id);
  // A slot granted after the job ended (e.g. expired at recovery) goes back at once.
  if (msg.type === 'reserve') ctx.actors.tell('ws', row.workspaceId, { type: 'slot_declined', generationId: row.id });
  // A provider that accepted the job after it ended (cancelled while its inputs were fetched) stops it.
  if (msg.type === 'submitted') depsOf(ctx).providers.forJob(row)?.cancel(msg.providerJobId);
  return { state, passivate: true };
}

/**
 * After a restart. A queued job past its deadline expires now; one still in time waits with no actor of
 * its own (its workspace, told to schedule by the recovery, keeps its deadline). A job in flight at the
 * crash lost its provider call with the process that made it: it is handed to its provider again, its
 * reservation and slot kept, unless it already used its attempts (then it fails with `attempts_exhausted`).
 * The new attempt is counted and committed before the provider is called. While generation is paused
 * (the emergency stop) it goes to no provider: it waits, as queued jobs do, with its reservation and slot,
 * and its workspace tells it to recover again once the stop is lifted.
 */
async function recover(state: GenerationActorState, row: GenerationRow, ctx: ActorContext): Promise<Outcome<GenerationActorState, NoReply>> {
  if (row.status === 'queued') {
    if (ctx.clock.now() >= row.queueDeadline.getTime()) return (await transition(state, row, { type: 'expire' }, ctx)).result;
    return { state, passivate: true };
  }
  const deps = depsOf(ctx);
  if (deps.generationPaused() && row.attempts < MAX_ATTEMPTS) {
    ctx.logger.info({ generationId: row.id, status: row.status }, 'a job in flight at the restart waits for the emergency stop to be lifted');
    hold(row, ctx);
    return { state, passivate: true };
  }
  // Decided now, before any write: a drain from here on waits for it.
  deps.held?.release(row.id);
  const provider = deps.providers.forJob(row);
  const lookUp = provider?.resume !== undefined;
  const inRequest = provider?.answersWithinRequest === true;
  return (await transition(state, row, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp, inRequest }, ctx)).result;
}

/**
 * A job its workspace reserved in its creation's transaction (a slot was free): durable as reserved, its
 * attempt counted, so it goes to its provider with no write of its own. It goes even when its shard has
 * begun to drain since: its slot was taken before, and the drain counts a reserved job as in flight and
 * waits for it to end (left reserved here, it would hold the drain, and so the handover, until the drain's
 * deadline). Should generation be paused, it waits as a job recovered during a pause does.
 */
function start(state: GenerationActorState, row: GenerationRow, ctx: ActorContext): Outcome<GenerationActorState, NoReply> {
  if (row.status !== 'reserved') return { state };
  const deps = depsOf(ctx);
  if (deps.generationPaused()) {
    hold(row, ctx);
    return { state, passivate: true };
  }
  deps.held?.release(row.id);
  deps.metrics?.generationTransition('queued', 'reserved');
  deps.live?.publish(row);
  submit(state, row, ctx);
  return { state };
}

/**
 * A job in flight (in the database) that goes to no provider while generation is paused: its workspace lets
 * it go once the stop is lifted; meanwhile a drain of its shard does not wait for it (held-jobs.ts).
 */
function hold(row: GenerationRow, ctx: ActorContext): void {
  depsOf(ctx).held?.hold(row.id, row.workspaceId);
  ctx.actors.tell('ws', row.workspaceId, { type: 'hold_recovered', generationId: row.id });
}

async function providerUpdate(
  state: GenerationActorState,
  row: GenerationRow,
  update: ProviderUpdate,
  ctx: ActorContext,
): Promise<Outcome<GenerationActorState, NoReply>> {
  switch (update.type) {
    case 'running':
      return (await transition(state, row, { type: 'started' }, ctx)).result;
    case 'progress':
      return (await transition(state, row, { type: 'note', detail: update.detail }, ctx)).result;
    case 'output':
      // Deltas go to the streams from the report itself (submit, below), never through the mailbox.
      return { state };
    case 'failed':
      return failOrReroute(state, row, update.errorCode, update.errorMessage, ctx, update.usage);
    case 'succeeded': {
      if (row.status === 'submitted') {
        const started = await transition(state, row, { type: 'started' }, ctx);
        if (!started.applied) return started.result;
      }
      // A token-priced job is charged by the tokens its provider reported (or, when it reported none, by their
      // upper bounds: the prompt's bytes in, the answer's bytes out).
      const current: GenerationRow = state.row!.tokenTerms ? { ...state.row!, usage: usageOf(update, state.row!) } : state.row!;
      let prepared: PreparedOutputs;
      try {
        // The provider reports once: reads that find the database unreachable are made again once it is back.
        prepared = await untilReachable(ctx.db, () => depsOf(ctx).outputs.prepare(current.workspaceId, current.id, update.files));
      } catch (error) {
        if (error instanceof OutputsOverStorageLimitError) {
          return (
            await transition(
              state,
              current,
              { type: 'fail', errorCode: 'storage_limit_reached', errorMessage: `The workspace's storage is full: ${error.message}.` },
              ctx,
            )
          ).result;
        }
        ctx.logger.error({ err: error }, 'storing outputs failed');
        return (await transition(state, current, { type: 'fail', errorCode: 'output_storage_failed', errorMessage: 'The outputs could not be stored.' }, ctx))
          .result;
      }
      let done: Awaited<ReturnType<typeof transition>>;
      try {
        // Outputs without files (text) write nothing more: the settlement's statements then all go together.
        done = await transition(
          state,
          current,
          { type: 'succeed', outputs: { textOutput: update.textOutput, outputAssetIds: prepared.assetIds } },
          ctx,
          prepared.assets,
        );
      } catch (error) {
        // The service is stopping with the database unreachable: whether the settlement committed is not known,
        // so its files stay (the next start finds the job in flight).
        if (error instanceof DatabaseUnavailableError || isDatabaseUnreachable(error)) throw error;
        // The terminal commit failed (for example, storage filled up meanwhile): nothing of it was kept.
        await prepared.discard();
        ctx.logger.error({ err: error }, 'committing the outputs failed');
        return (await transition(state, current, { type: 'fail', errorCode: 'output_storage_failed', errorMessage: 'The outputs could not be stored.' }, ctx))
          .result;
      }
      if (!done.applied) await prepared.discard();
      return done.result;
    }
  }
}

/**
 * An attempt failed. When another deployment of the model could fix it (docs/routing.md: a retriable failure,
 * a deployment that serves every parameter and input the job uses, not tried yet, its breaker closed, within the
 * model's budget) the job moves there, charged once whatever the attempts; otherwise this is its failure.
 */
async function failOrReroute(
  state: GenerationActorState,
  row: GenerationRow,
  errorCode: string,
  errorMessage: string,
  ctx: ActorContext,
  usage?: ProviderUsage,
): Promise<Outcome<GenerationActorState, NoReply>> {
  // Once a piece of its answer reached the streams, a job does not move to another deployment: it fails, and
  // is charged for what it streamed (its provider's usage when it gave one, else the tokens counted).
  const streamed = state.streamed?.started ? state.streamed : undefined;
  if (streamed) {
    const charged = await chargedRow(row, streamed, usage, ctx);
    return (await transition(state, charged.row, { type: 'fail', errorCode, errorMessage, charge: charged.charge }, ctx)).result;
  }
  const next = fallbackFor(row, errorCode, ctx);
  if (next) {
    const detail = `attempt on ${row.deploymentId} failed: ${errorCode}: ${errorMessage.slice(0, 200)}; trying ${next.id}`;
    const moved = await transition(state, row, { type: 'reroute', deploymentId: next.id, provider: next.provider, detail }, ctx);
    if (moved.applied) return moved.result;
  }
  return (await transition(state, row, { type: 'fail', errorCode, errorMessage }, ctx)).result;
}

/** The deployments a job was tried on, from its timeline's reroute notes, and the one it is on. */
export function triedDeployments(row: Pick<GenerationRow, 'timeline' | 'deploymentId'>): Set<string> {
  const tried = new Set<string>();
  for (const entry of row.timeline) {
    const match = /^attempt on (\S+) failed:/.exec(entry.detail ?? '');
    if (match) tried.add(match[1]!);
  }
  if (row.deploymentId !== null) tried.add(row.deploymentId);
  return tried;
}

function fallbackFor(row: GenerationRow, errorCode: string, ctx: ActorContext): DeploymentRecord | undefined {
  if (!isRetriable(errorCode) || row.deploymentId === null) return undefined;
  const deps = depsOf(ctx);
  const model = deps.catalog.get(row.modelId);
  if (!model || model.deployments.length < 2) return undefined;
  const tried = triedDeployments(row);
  const since = (row.startedAt ?? row.createdAt).getTime();
  if (!withinBudget(model.routing, tried.size, ctx.clock.now() - since)) return undefined;
  const needs = jobNeedsOf(row.params, row.inputs);
  // Breakers are asked at the hand-over itself (submit): an open one sends the job on from there.
  return chooseDeployment(model, needs, tried, { allows: () => true, inFlight: (id) => deps.providers.inFlight(id), random: Math.random });
}

/** Longest wait between two looks at a closed breaker, while every deployment of a job's model is open. */
const BREAKER_WAIT_MAX_MS = 5_000;

/**
 * Its deployment's breaker is open: another deployment of the model that serves the job, if one is left;
 * otherwise the job waits (it keeps its slot) and is handed over again when the breaker's cool-down ends, up
 * to its deadline at its provider (PROVIDER_JOB_TIMEOUT_MS after its first hand-over), then fails.
 */
async function breakerOpen(
  state: GenerationActorState,
  row: GenerationRow,
  deploymentId: string,
  retryAt: number | null,
  ctx: ActorContext,
  reason: 'breaker' | 'rate',
): Promise<Outcome<GenerationActorState, NoReply>> {
  if (row.deploymentId !== deploymentId || row.providerJobId !== null) return { state };
  const next = fallbackFor(row, reason === 'rate' ? 'provider_rate_limited' : 'provider_unavailable', ctx);
  if (next) {
    const why = reason === 'rate' ? 'provider_rate_limited: its requests per minute are used' : 'provider_unavailable: its circuit breaker is open';
    const detail = `attempt on ${deploymentId} failed: ${why}; trying ${next.id}`;
    const moved = await transition(state, row, { type: 'reroute', deploymentId: next.id, provider: next.provider, detail }, ctx);
    if (moved.applied) return moved.result;
  }
  const now = ctx.clock.now();
  const waitStarts = state.breakerWaitSince === undefined;
  state.breakerWaitSince ??= now;
  const deadline = Math.min(
    (row.startedAt ?? row.createdAt).getTime() + depsOf(ctx).providerJobTimeoutMs,
    state.breakerWaitSince + (depsOf(ctx).breakerWaitMs ?? Number.POSITIVE_INFINITY),
  );
  if (now >= deadline) {
    return (
      await transition(
        state,
        row,
        {
          type: 'fail',
          errorCode: 'provider_unavailable',
          errorMessage: `Every deployment of ${row.modelId} this job can run on stayed unavailable (${reason === 'rate' ? 'requests per minute used' : 'circuit breaker open'}) for ${Math.round((now - state.breakerWaitSince) / 1000)} s, until its deadline or the longest wait for a breaker (PROVIDER_BREAKER_WAIT_MS).`,
        },
        ctx,
      )
    ).result;
  }
  const wait = Math.max(50, Math.min(BREAKER_WAIT_MAX_MS, (retryAt ?? now + 1_000) - now, deadline - now));
  if (waitStarts) {
    // The timeline says what the job waits for, once, as the wait begins.
    const until = retryAt === null ? '' : ` until about ${new Date(retryAt).toISOString()}`;
    const why = reason === 'rate' ? `its requests per minute are used${until}` : `its circuit breaker is open${until}`;
    await transition(state, row, { type: 'note', detail: `waiting for ${deploymentId}: ${why}; giving up at ${new Date(deadline).toISOString()}` }, ctx);
  }
  state.timer?.cancel();
  state.timer = ctx.clock.setTimer(() => ctx.actors.tell('gen', row.id, { type: 'retry_submit' }), wait);
  return { state };
}

/**
 * Applies one command: decides, persists (terminal states through the workspace actor, with the money),
 * then performs the effects. A refused command changes nothing.
 */
async function transition(
  state: GenerationActorState,
  row: GenerationRow,
  command: GenerationCommand,
  ctx: ActorContext,
  outputAssets: NewAsset[] = [],
): Promise<{ applied: boolean; result: Outcome<GenerationActorState, NoReply> }> {
  const now = ctx.clock.now();
  const decision = decide(row, command, now);
  if (!decision.ok) return { applied: false, result: { state } };
  const at = new Date(now);
  // `decide` hands back a new row for every transition it applies (test/actors/generation-machine.test.ts): it is
  // stamped here rather than copied once more.
  const next: GenerationRow = decision.state;
  next.updatedAt = at;

  // Submitted and running are shown to streams by their own commit's callback, not below.
  let shownOnCommit = false;
  if (decision.settle && isTerminal(next.status)) {
    const { money } = decision.settle;
    // Transitions still riding are written with the settlement, in its group commit; shown once it committed.
    const rode = takeRiding(state);
    const progress = rode?.progress;
    // The event's webhook deliveries commit with the terminal state (docs/webhooks.md, Deliveries).
    const settlement: GenerationSettlement = {
      status: next.status,
      completedAt: (next.completedAt ?? at).toISOString(),
      textOutput: next.textOutput ?? undefined,
      outputAssetIds: next.outputAssetIds,
      errorCode: next.errorCode ?? undefined,
      errorMessage: next.errorMessage ?? undefined,
      timeline: next.timeline,
      ...(outputAssets.length > 0 ? { outputAssets } : {}),
      generation: next,
      event: { generation: next, status: next.status, at: now, traceParent: currentTraceparent() },
    };
    const settled = await ctx.actors.ask(
      'ws',
      row.workspaceId,
      { type: 'settle', generationId: row.id, money, settlement, ...(progress ? { progress } : {}) },
      SETTLE_WAIT_MS,
    );
    if (money === 'capture' && row.tokenTerms) next.credits = settled.credits;
    for (const endpointId of settled.endpointIds) ctx.actors.tell('whk', endpointId, { type: 'wake' });
    for (const shown of rode?.rows ?? []) depsOf(ctx).live?.publish(shown);
  } else if (decision.effects.length === 0 && depsOf(ctx).providers.forJob(row)?.answersWithinRequest) {
    // Nothing to do once durable, and nothing a restart could use: it rides with the job's next write.
    const traceParent = next.status === 'running' ? currentTraceparent() : (state.riding?.traceParent ?? null);
    const timer = state.riding?.timer ?? rideTimer(() => ctx.actors.tell('gen', row.id, { type: 'write_riding' }));
    state.riding = { from: state.riding?.from ?? row.status, rows: [...(state.riding?.rows ?? []), next], traceParent, timer };
    shownOnCommit = true;
  } else {
    // This write carries the riding transitions too (it writes the whole row): shown with it.
    const taken = takeRiding(state);
    const rode = taken?.rows ?? [];
    const progress = {
      from: taken?.progress.from ?? row.status,
      row: next,
      traceParent: next.status === 'running' ? currentTraceparent() : (taken?.progress.traceParent ?? null),
      endpointIds: undefined as string[] | undefined,
    };
    const written = writeProgressOf(ctx.writer, progress);
    const woken = written.committed.then(() => {
      for (const endpointId of progress.endpointIds ?? []) ctx.actors.tell('whk', endpointId, { type: 'wake' });
    });
    if (decision.effects.length > 0) {
      // Its effects (the provider's call) need the transition durable first: a restart then finds the attempt.
      await woken;
      for (const shown of rode) depsOf(ctx).live?.publish(shown);
    } else {
      // Submitted and running change nothing outside: the actor goes on while they commit, in order (one
      // lane), and its settlement is queued behind them. Streams see each once committed; a crash before
      // then finds the job as last committed, and resumes it as any job in flight.
      shownOnCommit = true;
      const live = depsOf(ctx).live;
      void woken.then(
        () => {
          for (const shown of rode) live?.publish(shown);
          live?.publish(next);
        },
        (error: unknown) => {
          ctx.logger.warn(
            { err: error, generationId: row.id, status: next.status },
            'a progress write failed: the job goes on, its settlement writes its whole timeline',
          );
        },
      );
    }
  }
  state.row = next;
  if (isTerminal(next.status)) {
    state.endProviderSpan?.(next.status, next.errorCode ?? undefined);
    state.endProviderSpan = undefined;
  }
  depsOf(ctx).metrics?.generationTransition(row.status, next.status);
  // Committed (the progress write, or the settlement the workspace actor answered): streams may show it.
  if (!shownOnCommit) depsOf(ctx).live?.publish(next);
  for (const effect of decision.effects) perform(effect, state, next, ctx);
  return { applied: true, result: { state, passivate: isTerminal(next.status) } };
}

/** Takes the transitions riding off the actor, their timer stopped: their rows, and the progress write that carries them. */
function takeRiding(state: GenerationActorState): { rows: GenerationRow[]; progress: Progress } | undefined {
  const riding = state.riding;
  if (!riding) return undefined;
  riding.timer.cancel();
  state.riding = undefined;
  return { rows: riding.rows, progress: { from: riding.from, row: riding.rows[riding.rows.length - 1]!, traceParent: riding.traceParent } };
}

/**
 * Writes the transitions riding once RIDE_MS passed with the job still running: one progress write of the
 * last row, not waited for (a settlement queues behind it); streams see them once it committed.
 */
function writeRiding(state: GenerationActorState, ctx: ActorContext): void {
  const riding = takeRiding(state);
  if (!riding) return;
  const { progress } = riding;
  const written = writeProgressOf(ctx.writer, progress);
  const live = depsOf(ctx).live;
  void written.committed.then(
    () => {
      for (const endpointId of progress.endpointIds ?? []) ctx.actors.tell('whk', endpointId, { type: 'wake' });
      for (const shown of riding.rows) live?.publish(shown);
    },
    (error: unknown) => {
      ctx.logger.warn({ err: error, generationId: progress.row.id }, 'a progress write failed: the job goes on, its settlement writes its whole timeline');
    },
  );
}

function perform(effect: GenerationEffect, state: GenerationActorState, row: GenerationRow, ctx: ActorContext): void {
  const deps = depsOf(ctx);
  switch (effect.type) {
    case 'cancel_queue_timer':
      state.timer?.cancel();
      state.timer = undefined;
      return;
    case 'submit_to_provider':
      submit(state, row, ctx, undefined, effect.afterRestart);
      return;
    case 'follow_at_provider':
      submit(state, row, ctx, effect.providerJobId);
      return;
    case 'cancel_at_provider':
      deps.providers.forJob(row)?.cancel(effect.providerJobId);
      return;
    default: {
      const unperformed: never = effect;
      throw new Error(`no way to perform ${JSON.stringify(unperformed)}`);
    }
  }
}

type ProviderUsage = { inputTokens: number; outputTokens: number };

/**
 * A token-priced job that ends after streaming part of its answer, with the usage it is charged: its
 * provider's when it reported one, else its prompt and the pieces streamed, counted (providers/token-count.ts).
 * A job priced otherwise is not charged for a part (its credits are released).
 */
async function chargedRow(
  row: GenerationRow,
  streamed: StreamedText,
  usage: ProviderUsage | undefined,
  ctx: ActorContext,
): Promise<{ row: GenerationRow; charge: boolean }> {
  if (!row.tokenTerms) return { row: { ...row, textOutput: streamed.text }, charge: false };
  const target = row.deploymentId !== null ? depsOf(ctx).deployment(row.deploymentId)?.target : undefined;
  const counted = usage ?? (await countUsage(typeof target?.model === 'string' ? target.model : undefined, promptTextsOf(row.params), streamed.text));
  return { row: { ...row, textOutput: streamed.text, usage: counted }, charge: true };
}

/** The texts a text job sent its provider: its conversation's messages, or its system prompt and prompt. */
function promptTextsOf(params: Record<string, unknown>): { texts: string[]; messages: number } {
  const text = (value: unknown) => (typeof value === 'string' ? value : '');
  if (Array.isArray(params.messages)) {
    const texts = params.messages.map((m) => text((m as { content?: unknown } | null)?.content));
    return { texts, messages: texts.length };
  }
  const texts = [text(params.systemPrompt), text(params.prompt)].filter((t) => t !== '');
  return { texts, messages: texts.length };
}

/** The tokens a succeeded text job used: as its provider reported, or their upper bounds when it did not. */
function usageOf(update: Extract<ProviderUpdate, { type: 'succeeded' }>, row: GenerationRow): NonNullable<GenerationRow['usage']> {
  const whole = (n: unknown) => (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : undefined);
  const input = whole(update.usage?.inputTokens);
  const output = whole(update.usage?.outputTokens);
  if (input !== undefined && output !== undefined) return { inputTokens: input, outputTokens: output };
  return { inputTokens: inputTokenBound(row.params), outputTokens: Buffer.byteLength(update.textOutput ?? '', 'utf8') };
}

/** A provider's report with its text made storable: a NUL in an answer must not make the job's write fail. */
function storableUpdate(update: ProviderUpdate): ProviderUpdate {
  switch (update.type) {
    case 'running':
      return update;
    case 'progress':
      return { ...update, detail: storableText(update.detail) };
    case 'output':
      return { ...update, delta: storableText(update.delta) };
    case 'failed':
      return { ...update, errorCode: storableText(update.errorCode), errorMessage: storableText(update.errorMessage) };
    case 'succeeded':
      return update.textOutput === undefined ? update : { ...update, textOutput: storableText(update.textOutput) };
  }
}

/**
 * Hands the job to its provider without blocking the actor, or, with `following`, follows the job its provider
 * accepted under that id before a restart (never submitting it again): results come back as messages.
 * Returns what ends the provider span when the job ends some other way (cancelled, timed out, failed here).
 */
function submit(state: GenerationActorState, row: GenerationRow, ctx: ActorContext, following?: string, afterRestart?: boolean): void {
  const deps = depsOf(ctx);
  const tell = (msg: GenerationMessage) => ctx.actors.tell('gen', row.id, msg);
  state.endProviderSpan = undefined;
  const provider = deps.providers.forJob(row);
  if (!provider) {
    tell({ type: 'submit_failed', errorCode: 'provider_unavailable', errorMessage: `The provider ${row.provider} is not configured on this service.` });
    return;
  }
  // The pieces of this attempt's text answer: published as they come, never through the mailbox.
  const streamed = new StreamedText();
  state.streamed = streamed;
  // One span from the hand-over to the provider's last word (or its refusal): the provider's own HTTP calls
  // (undici instrumentation) and the inputs fetched for it are its children. The local provider, which
  // works in this process, has no other span.
  const span = serviceTracer().startSpan(`provider ${provider.name}${following ? ' resume' : ''}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      'gen_ai.provider.name': provider.name,
      'gen_ai.request.model': row.modelId,
      'gen_ai.operation.name': row.mode,
      'generation.id': row.id,
      ...(row.deploymentId ? { 'generation.deployment': row.deploymentId } : {}),
      ...(following ? { 'provider.job.id': following } : {}),
    },
  });
  const end = (errorType?: string) => {
    if (!span.isRecording()) return;
    if (errorType !== undefined) {
      span.setAttribute('error.type', errorType);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  };
  void context.with(trace.setSpan(context.active(), span), async () => {
    try {
      const inputs = await untilReachable(ctx.db, () => deps.inputs.resolve(row.workspaceId, row.inputs));
      const deployment = row.deploymentId !== null ? deps.deployment(row.deploymentId) : undefined;
      const job: ProviderJob = {
        generationId: row.id,
        mode: row.mode as Mode,
        modelId: row.modelId,
        params: row.params,
        inputs,
        input: upstreamInput(deployment?.input, row.params),
        deadline: ctx.clock.now() + deps.providerJobTimeoutMs,
        ...(afterRestart ? { afterRestart: true } : {}),
      };
      const report = (update: ProviderUpdate) => {
        if (update.type === 'output') {
          if (update.delta === '' || state.streamed !== streamed) return;
          const delta = storableText(update.delta);
          deps.live?.publishOutput({ workspaceId: row.workspaceId, generationId: row.id, index: streamed.add(delta), delta });
          return;
        }
        if (update.type === 'succeeded') end();
        else if (update.type === 'failed') end(update.errorCode);
        tell({ type: 'provider_update', update: storableUpdate(update) });
      };
      // Each attempt's end is told to its deployment's breaker once (with the half-open ticket, if it had one).
      let ticket: string | undefined;
      let told = false;
      // The attempt counts as in flight on its deployment (least-busy routing) from its hand-over to its end.
      const deploymentId = row.deploymentId;
      if (deploymentId !== null) deps.providers.started(deploymentId);
      const outcome = (result: { ok: true } | { ok: false; errorCode: string }) => {
        if (told || deploymentId === null) return;
        told = true;
        deps.providers.ended(deploymentId);
        if (deps.breakers) void deps.breakers.record(deploymentId, result, ticket);
      };
      const counted = (next: (update: ProviderUpdate) => void) => (update: ProviderUpdate) => {
        if (update.type === 'succeeded') outcome({ ok: true });
        else if (update.type === 'failed') outcome({ ok: false, errorCode: update.errorCode });
        next(update);
      };
      if (following !== undefined && provider.resume) {
        provider.resume(following, job, counted(report));
        return;
      }
      // The deployment's own requests per minute, then its breaker: either refusing hands the job on (breakerOpen) before any call.
      // Not handed over here after all: no attempt to count, the actor sends the job on or makes it wait.
      const notHere = (deploymentId: string, retryAt: number | null, reason: 'breaker' | 'rate') => {
        deps.providers.ended(deploymentId);
        told = true;
        end(reason === 'rate' ? 'rate_limited' : 'breaker_open');
        tell({ type: 'breaker_open', deploymentId, retryAt, reason });
      };
      const perMinute = row.deploymentId !== null ? deps.deployment(row.deploymentId)?.limits.requestsPerMinute : undefined;
      if (row.deploymentId !== null && perMinute !== undefined && deps.deploymentRequest) {
        const window = await deps.deploymentRequest(row.deploymentId, perMinute);
        if (!window.allowed) return notHere(row.deploymentId, window.resetAt, 'rate');
      }
      if (row.deploymentId !== null && deps.breakers) {
        const admission = await deps.breakers.admit(row.deploymentId);
        if (!admission.allowed) return notHere(row.deploymentId, admission.retryAt, 'breaker');
        ticket = admission.ticket;
      }
      let providerJobId: string;
      try {
        ({ providerJobId } = await provider.submit(job, counted(report)));
      } catch (error) {
        outcome({ ok: false, errorCode: error instanceof ProviderFailure ? error.code : 'provider_error' });
        throw error;
      }
      span.setAttribute('provider.job.id', providerJobId);
      tell({ type: 'submitted', providerJobId: storableText(providerJobId) });
    } catch (error) {
      if (error instanceof InputError) {
        end(error.code);
        tell({ type: 'submit_failed', errorCode: error.code, errorMessage: storableText(error.message) });
      } else if (error instanceof ProviderFailure) {
        // The provider refused the job: its failure, as our code and its own words.
        end(error.code);
        tell({ type: 'submit_failed', errorCode: error.code, errorMessage: storableText(error.message) });
      } else {
        span.recordException(error as Error);
        end('provider_error');
        tell({ type: 'submit_failed', errorCode: 'provider_error', errorMessage: storableText(`The provider refused the job: ${(error as Error).message}`) });
      }
    }
  });
  // The job ended before its provider's last word: a cancel is no error of the call; any other end is.
  state.endProviderSpan = (outcome, errorCode) => {
    if (!span.isRecording()) return;
    span.setAttribute('generation.outcome', outcome);
    end(outcome === 'succeeded' || outcome === 'cancelled' ? undefined : (errorCode ?? outcome));
  };
}

function armQueueTimer(state: GenerationActorState, row: GenerationRow, ctx: ActorContext): void {
  state.timer?.cancel();
  const wait = Math.max(0, row.queueDeadline.getTime() - ctx.clock.now());
  state.timer = ctx.clock.setTimer(() => ctx.actors.tell('gen', row.id, { type: 'expire' }), wait);
}
