/**
 * A job's end, as a pure decision (decision.ts): its credits captured (a token-priced job: what it used, its
 * carry taken in, the rest released) or released, its slot freed, the next queued jobs started, and its
 * settlement handed to the group commit as an effect.
 */
import { capture, capturePart, release, spendAt, spendChange } from '../../domain/account.ts';
import { exactNano, tokenCharge } from '../../domain/catalog/pricing.ts';
import { settleKey } from '../../domain/key-limits.ts';
import type { NoReply } from '../../runtime/actor-protocol.ts';
import type { Decision, FollowUp, SlotPort, WorkspaceEffect, WorkspaceFacts } from './decision.ts';
import { schedule } from './decide-schedule.ts';
import { holdsSlot, settledJob } from './jobs.ts';
import type { SettleReply, WorkspaceMessage } from './protocol.ts';
import type { Settlement } from './settlements.ts';
import type { WorkspaceState } from './state.ts';

/**
 * A settle's reply as decided: what the job was charged. The endpoints its event reached are the write's
 * answer (filled in on the effect's settlement and progress once they commit): the actor adds them.
 */
export type SettleCharged = Omit<SettleReply, 'endpointIds'>;

/**
 * `settle`: the job ended. A job that freed a slot stays, settling, until its settlement commits (the actor is
 * then told `settle_committed`); any other leaves the workspace now. A job settled twice moves no money the
 * second time, and that settlement's write fails (its row has ended already).
 */
export function decideSettle<S extends WorkspaceState>(
  state: S,
  msg: Extract<WorkspaceMessage, { type: 'settle' }>,
  facts: WorkspaceFacts,
  slots: SlotPort,
  now: number,
): Decision<S, SettleCharged> {
  state.plan = facts.plan;
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
  slots.release(generationId);
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
  const onCommitted: FollowUp[] = freedSlot
    ? [{ type: 'tell_self', msg: { type: 'settle_committed', generationId } }, { type: 'money_moved' }]
    : [{ type: 'money_moved' }];
  const effects: WorkspaceEffect[] = [{ type: 'write_settlement', settlement: row, progress, onCommitted }];
  schedule(state, facts, slots, effects);
  return { state, reply: { settled: true, credits: kind === 'capture' ? settlement.generation.credits : 0 }, effects };
}

/** `settle_committed`: the settlement of a job that held a slot committed; a job reserved at creation need not wait behind it any more. */
export function decideSettleCommitted<S extends WorkspaceState>(state: S, generationId: string): Decision<S, NoReply> {
  if (state.jobs.get(generationId)?.status === 'settling') state.jobs.delete(generationId);
  return { state, reply: undefined, effects: [] };
}
