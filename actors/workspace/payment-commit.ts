import type { GroupCommitWriter } from '../../persistence/group-commit.ts';
import {
  activateWallet,
  advanceSubscription,
  disableAutoRecharge,
  endSubscription,
  insertAutoRechargeDeposit,
  insertSavedCardPayment,
  recordBillingEvent,
  settleOrder,
  settlePayment,
  startSubscription,
  writeWalletSettings,
} from '../../persistence/stores/payment-outcomes.ts';
import type { Transaction } from '../../persistence/stores/transaction.ts';
import { writeMoney } from '../../persistence/stores/workspace/money.ts';
import type { FollowUp, PaymentStatement, WorkspaceEffect } from './decision.ts';

/**
 * A `commit` effect: its statements in order (persistence/stores/payment-outcomes.ts), then its ledger entries
 * and the wallet's activation, in one transaction of the writer. Resolves once committed, with the follow-ups
 * its statements' answers chose (a subscription advanced, or moved meanwhile).
 */
export async function commitPayment(effect: Extract<WorkspaceEffect, { type: 'commit' }>, workspaceId: string, writer: GroupCommitWriter): Promise<FollowUp[]> {
  let then: FollowUp[] = [];
  await writer.write(async (tx) => {
    // Chosen again if the writer runs the unit again.
    then = [];
    for (const statement of effect.statements) {
      const chosen = await run(tx, workspaceId, statement);
      if (chosen) then = chosen;
    }
    const { money } = effect;
    if (!money) return;
    await writeMoney(tx, workspaceId, money.entries, money.at);
    if (money.activatesWallet) await activateWallet(tx, workspaceId);
  });
  return then;
}

/** Runs one statement; the follow-ups its answer chose, if it chooses any. */
async function run(tx: Transaction, workspaceId: string, s: PaymentStatement): Promise<FollowUp[] | undefined> {
  switch (s.kind) {
    case 'record_billing_event':
      await recordBillingEvent(tx, { id: s.id, provider: s.provider, type: s.eventType, paymentId: s.paymentId, workspaceId, applied: s.applied, at: s.at });
      return undefined;
    case 'settle_payment':
      await settlePayment(tx, s.paymentId, s.status, s.at, s.failureReason);
      return undefined;
    case 'settle_order':
      await settleOrder(tx, s.purpose, s.orderId, s.status, s.at);
      return undefined;
    case 'start_subscription':
      await startSubscription(tx, { id: s.id, workspaceId, plan: s.plan, periodEnd: s.periodEnd }, s.at);
      return undefined;
    case 'end_subscription':
      await endSubscription(tx, { id: s.id, workspaceId }, s.status, s.endedAt, s.fallbackPlan, s.at);
      return undefined;
    case 'advance_subscription':
      return (await advanceSubscription(tx, s.id, s.periodEnd, s.nextEnd, s.at)) ? s.ifAdvanced : s.ifMoved;
    case 'insert_saved_card_payment':
      await insertSavedCardPayment(tx, s.payment);
      return undefined;
    case 'insert_auto_recharge_deposit':
      await insertAutoRechargeDeposit(tx, { id: s.id, workspaceId, amountCents: s.amountCents, status: s.status, paymentId: s.paymentId, at: s.at });
      return undefined;
    case 'disable_auto_recharge':
      await disableAutoRecharge(tx, workspaceId);
      return undefined;
    case 'write_wallet_settings':
      await writeWalletSettings(tx, workspaceId, s.settings, s.at);
      return undefined;
    default: {
      const unrun: never = s;
      throw new Error(`no way to run ${JSON.stringify(unrun)}`);
    }
  }
}
