import type { Outcome } from '../../runtime/actor-behavior.ts';
import { withJobContext } from '../../runtime/tracing.ts';
import { writeKeyLimits } from '../../persistence/stores/workspace/keys.ts';
import type { ActorContext } from '../kinds.ts';
import { depsOf } from '../deps.ts';
import { pendingProgressOf, writeProgressOf } from '../generation/progress-writes.ts';
import { creationsOf, reservedCreationsOf } from './creations.ts';
import type { Decision, FollowUp, WorkspaceEffect } from './decision.ts';
import { commitPayment } from './payment-commit.ts';
import { writeSettlement } from './settlements.ts';
import type { WorkspaceActorState } from './state.ts';

type State = WorkspaceActorState;

/**
 * The workspace actor's one interpreter: does what an effect of its deciders (decision.ts) says, every kind of
 * which it must handle to compile. It alone touches the writer, the timer, the other actors, the streams, the
 * metrics and the payment provider, and keeps the handles no decider sees (WorkspaceActorState). A write
 * answers its commit, its follow-ups performed once it committed (before any reply); anything else nothing.
 */
export function perform(effect: WorkspaceEffect, state: State, ctx: ActorContext): Promise<void> | undefined {
  const deps = depsOf(ctx);
  switch (effect.type) {
    case 'write_creation': {
      const written =
        effect.lane === 'creations'
          ? creationsOf(ctx.writer).add(effect.creation)
          : reservedCreationsOf(ctx.writer).addAfter(effect.creation, state.lastSettlement).committed;
      return followed(written, effect.onCommitted, effect.onFailed, state, ctx);
    }
    case 'write_settlement': {
      const { settlement, progress } = effect;
      // Its transitions not written yet go just before it, queued in the same turn: one group commit. Else it
      // goes behind the job's progress writes still to commit.
      const after = progress ? writeProgressOf(ctx.writer, progress).position : pendingProgressOf(ctx.writer, settlement.generationId);
      const added = writeSettlement(ctx.writer, settlement, after);
      state.lastSettlement = added.position;
      return followed(added.committed, effect.onCommitted, undefined, state, ctx);
    }
    case 'write_key_limits': {
      const { keyId, limits } = effect;
      const at = new Date(effect.at);
      return ctx.writer.write((em) => writeKeyLimits(em, state.workspaceId, keyId, limits, at));
    }
    case 'commit':
      return commitPayment(effect, state.workspaceId, ctx.writer).then((then) => performEach(then, state, ctx));
    case 'arm_expiry':
      state.expiryTimer?.cancel();
      state.expiryTimer = ctx.clock.setTimer(
        () => ctx.actors.tell('ws', state.workspaceId, { type: 'expire_queued' }),
        Math.max(0, effect.at - ctx.clock.now()),
      );
      return undefined;
    case 'cancel_expiry':
      state.expiryTimer?.cancel();
      state.expiryTimer = undefined;
      return undefined;
    case 'tell_self':
      ctx.actors.tell('ws', state.workspaceId, effect.msg);
      return undefined;
    case 'tell_generation':
      ctx.actors.tell('gen', effect.id, effect.msg);
      return undefined;
    case 'start_generation': {
      const { id, msg } = effect;
      withJobContext(effect.trace, () => ctx.actors.tell('gen', id, msg));
      return undefined;
    }
    case 'publish':
      deps.live?.publish(effect.row);
      return undefined;
    case 'count_transition':
      deps.metrics?.generationTransition(effect.from, effect.to);
      return undefined;
    case 'money_moved':
      deps.budgets?.moneyMoved(state.workspaceId);
      return undefined;
    case 'plan_changed':
      deps.billing.planChanged(state.workspaceId);
      return undefined;
    case 'schedule_renewal':
      deps.billing.renewals.schedule(state.workspaceId, effect.subscriptionId, effect.at);
      return undefined;
    case 'log':
      ctx.logger[effect.level](effect.fields, effect.message);
      return undefined;
    case 'charge_under_way':
      deps.billing.charges.add(effect.key);
      return undefined;
    case 'charge_done':
      deps.billing.charges.delete(effect.key);
      return undefined;
    case 'charge_saved_card': {
      const { paymentId, amountCents, description } = effect.charge;
      const charged = deps.billing.provider.chargeSaved({ paymentId, workspaceId: state.workspaceId, amountCents, description });
      if (effect.purpose === 'renewal') {
        const { charge } = effect;
        ctx.pipeToSelf(charged, (outcome) =>
          outcome.ok
            ? { type: 'renewal_charged', charge, result: outcome.value }
            : { type: 'renewal_charged', charge, result: null, error: (outcome.error as Error)?.message ?? String(outcome.error) },
        );
      } else {
        const { charge } = effect;
        ctx.pipeToSelf(charged, (outcome) => {
          if (!outcome.ok) ctx.logger.error({ err: outcome.error, paymentId: charge.paymentId }, 'an auto-recharge charge got no answer');
          return { type: 'recharge_charged', charge, result: outcome.ok ? outcome.value : null };
        });
      }
      return undefined;
    }
    default: {
      const unperformed: never = effect;
      throw new Error(`no way to perform ${JSON.stringify(unperformed)}`);
    }
  }
}

/** A write's commit, its follow-ups performed once it committed (before the reply), or `onFailed`'s once it failed. */
function followed(written: Promise<void>, onCommitted: FollowUp[], onFailed: FollowUp[] | undefined, state: State, ctx: ActorContext): Promise<void> {
  return written.then(
    () => performEach(onCommitted, state, ctx),
    onFailed &&
      ((error: unknown) => {
        performEach(onFailed, state, ctx);
        throw error;
      }),
  );
}

/** Performs follow-ups in order (none of them writes). */
function performEach(effects: readonly WorkspaceEffect[], state: State, ctx: ActorContext): void {
  for (const effect of effects) perform(effect, state, ctx);
}

/**
 * Performs a decision's effects in order, not waiting for its writes. Their commit, once each write's
 * follow-ups are performed: undefined when it has none; one write's own; or, for several, once every one
 * ended, failing with the first that failed (in the order of the effects). `afterWrites` is performed once
 * they all ended, whatever became of them, before the reply.
 */
export function performAll(decision: Decision<State, unknown>, ctx: ActorContext): Promise<void> | undefined {
  const { state } = decision;
  let one: Promise<void> | undefined;
  let several: Array<Promise<void>> | undefined;
  for (const effect of decision.effects) {
    const written = perform(effect, state, ctx);
    if (!written) continue;
    if (several) several.push(written);
    else if (one) several = [one, written];
    else one = written;
  }
  const durable = several ? allCommitted(several) : one;
  const after = decision.afterWrites;
  if (durable && after) {
    const performAfter = () => performEach(after, state, ctx);
    durable.then(performAfter, performAfter);
  }
  return durable;
}

function allCommitted(writes: Array<Promise<void>>): Promise<void> {
  return Promise.allSettled(writes).then((settled) => {
    const failed = settled.find((item): item is PromiseRejectedResult => item.status === 'rejected');
    if (failed) throw failed.reason;
  });
}

/**
 * Performs a decision and answers, the actor going on with its next message meanwhile: the reply at once when
 * it wrote nothing, else once its writes committed (`replyWhenDurable`: a failed write then reloads the actor).
 */
export function answer<R>(decision: Decision<State, R>, ctx: ActorContext): Outcome<State, R> {
  const { state, reply } = decision;
  const written = performAll(decision, ctx);
  if (!written) return { state, reply } as Outcome<State, R>;
  return { state, replyWhenDurable: reply === undefined ? written : written.then(() => reply) } as Outcome<State, R>;
}

/**
 * Performs a decision in the mailbox: each effect in order, each write awaited before the next effect and the
 * next message (the payments': what they read from the database stays true until they have written; a failed
 * commit crashes the actor, which reloads). Then the reply.
 */
export async function answerInMailbox<R>(decision: Decision<State, R>, ctx: ActorContext): Promise<Outcome<State, R>> {
  const { state, reply } = decision;
  for (const effect of decision.effects) {
    const written = perform(effect, state, ctx);
    if (written) await written;
  }
  return { state, reply } as Outcome<State, R>;
}
