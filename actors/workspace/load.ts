import type { ActorContext } from '../../runtime/actor-behavior.ts';
import { jobContextOf } from '../../runtime/tracing.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { readWorkspaceKeySpends } from '../../persistence/stores/workspace/keys.ts';
import type { OpenJob, WorkspaceRecord } from '../../persistence/stores/workspace/load.ts';
import { depsOf, type ActorDeps } from '../deps.ts';
import { defaultWalletSettings, emptyAccount, monthOf, type Account } from '../../domain/account.ts';
import { IdempotencyCache } from './idempotency-cache.ts';
import { dayStart, monthStart, type KeyJob, type KeySpend } from '../../domain/key-limits.ts';
import { loadedJob, WorkspaceJobs } from './jobs.ts';
import type { WorkspaceActorState } from './state.ts';

const num = (value: number | string | null | undefined): number => (value === null || value === undefined ? 0 : Number(value));

/**
 * The actor's state from its record. Takes back the providers' capacity its jobs in flight hold; the
 * caller arms the queue's expiry timer.
 */
export function workspaceStateOf(record: WorkspaceRecord, ctx: ActorContext<ActorDeps>): WorkspaceActorState {
  const row = record.account;
  const account: Account = row
    ? {
        availableCredits: num(row.available_credits),
        reservedCredits: num(row.reserved_credits),
        walletCents: num(row.wallet_cents),
        reservedWalletCents: num(row.reserved_wallet_cents),
        walletActivated: row.wallet_activated === true,
        tokenCarryNano: BigInt(row.token_carry_nano ?? 0),
        reservations: {},
      }
    : emptyAccount();
  const { open } = record;
  for (const g of open) {
    if (g.reserved_credits !== null) account.reservations[g.id] = { credits: Number(g.reserved_credits), walletCents: Number(g.reserved_wallet_cents) };
  }
  const { capacity } = depsOf(ctx);
  const slotKey = (g: OpenJob) => depsOf(ctx).slotKeyOf(g.provider, g.deployment_id);
  for (const g of open) if (g.status !== 'queued') capacity.hold(slotKey(g), g.id);
  // The keys of unfinished jobs, each job counted as its create counted it (its price and wallet part, in its creation's day and month).
  const keys = new Map(record.keys);
  const jobs = new WorkspaceJobs();
  for (const g of open) {
    let keyJob: KeyJob | undefined;
    if (g.api_key_id !== null) {
      const created = new Date(g.created_at).getTime();
      const held = g.reserved_credits !== null;
      keyJob = {
        keyId: g.api_key_id,
        day: dayStart(created),
        month: monthStart(created),
        credits: held ? Number(g.credits) : 0,
        walletCents: held ? Number(g.reserved_wallet_cents) : 0,
      };
      const key = keys.get(keyJob.keyId);
      if (key) key.unfinished++;
    }
    const trace = g.status === 'queued' ? (jobContextOf(g.trace_context) ?? undefined) : undefined;
    jobs.put(loadedJob({ id: g.id, status: g.status, slotKey: slotKey(g), queueDeadline: new Date(g.queue_deadline).getTime(), trace, key: keyJob }));
  }
  return {
    workspaceId: record.workspaceId,
    plan: depsOf(ctx).catalog.plan(record.plan ?? depsOf(ctx).catalog.defaultPlan().id),
    account,
    jobs,
    expiryTimer: undefined,
    expiryAt: undefined,
    lastSettlement: 0,
    idempotency: new IdempotencyCache(),
    wallet: row
      ? {
          autoRecharge: {
            enabled: row.auto_recharge_enabled === true,
            thresholdCents: num(row.auto_recharge_threshold_cents),
            amountCents: num(row.auto_recharge_amount_cents),
          },
          monthlySpendCapCents: row.monthly_spend_cap_cents === null ? null : Number(row.monthly_spend_cap_cents),
        }
      : defaultWalletSettings(),
    spend: { month: monthOf(record.now), spentCents: record.walletSpentCents },
    recharging: false,
    keys,
  };
}

/** The limits and current spend of the workspace's keys among `keyIds` (readKeySpends). */
export function loadKeySpends(ctx: ActorContext, keyIds: string[], now: number): Promise<Map<string, KeySpend>> {
  return readWorkspaceKeySpends(openUnit(ctx.db), ctx.id, keyIds, now);
}
