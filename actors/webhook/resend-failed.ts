/** The recover operation (`POST /v1/webhooks/:id/recover`): an operator's re-send of an endpoint's failed and expired deliveries in a time range. */
import type { Unit } from '../../persistence/stores/unit.ts';
import { failedDeliveriesIn } from '../../persistence/stores/webhooks/deliveries.ts';
import { claimRecoveryRow, readRecoveryRow, writeRecoveryAnswer } from '../../persistence/stores/webhooks/recoveries.ts';
import { insertResends } from './resend.ts';

/** The largest range one recover request covers, and how far back it may start: failed and expired deliveries are kept this long (retention.ts). */
export const RECOVER_WINDOW_MS = 7 * 24 * 3_600_000;
/** Deliveries one request re-sends at most; the answer's nextSince continues from where it stopped. */
export const RECOVER_MAX_DELIVERIES = 10_000;
/** An Idempotency-Key of a recover request is remembered this long (as generations' are). */
export const RECOVER_KEY_TTL_MS = 24 * 3_600_000;

export interface RecoverAnswer {
  endpointId: string;
  since: string;
  until: string;
  /** Deliveries queued by this request. */
  count: number;
  firstDeliveryId: string | null;
  lastDeliveryId: string | null;
  /** Set when the range held more than RECOVER_MAX_DELIVERIES: send the same request with this as since. */
  nextSince: string | null;
}

/**
 * Queues a re-send of every failed or expired delivery of the endpoint made in [since, until), oldest first,
 * in one transaction: one read of the originals (an index range of the endpoint's unsent deliveries) and
 * one INSERT of their copies. A delivery whose re-send is still pending is left out, so a request repeated
 * before the first one's deliveries went out queues nothing twice.
 */
export async function recoverRange(tx: Unit, endpointId: string, since: Date, until: Date, now: number): Promise<RecoverAnswer> {
  const rows = await failedDeliveriesIn(tx, endpointId, since, until, RECOVER_MAX_DELIVERIES + 1);
  const more = rows.length > RECOVER_MAX_DELIVERIES;
  const taken = more ? rows.slice(0, RECOVER_MAX_DELIVERIES) : rows;
  const ids = await insertResends(
    tx,
    endpointId,
    taken.map((r) => r.id),
    now,
  );
  return {
    endpointId,
    since: since.toISOString(),
    until: until.toISOString(),
    count: ids.length,
    firstDeliveryId: ids[0] ?? null,
    lastDeliveryId: ids[ids.length - 1] ?? null,
    nextSince: more ? new Date(rows[RECOVER_MAX_DELIVERIES]!.created_at).toISOString() : null,
  };
}

export type KeyClaim = { kind: 'fresh' } | { kind: 'replay'; answer: RecoverAnswer } | { kind: 'conflict' };

/**
 * Takes an Idempotency-Key for a recover request of an endpoint, in the request's transaction. A key
 * used by a request still running waits for it (the unique key), then answers as it did. A key older
 * than RECOVER_KEY_TTL_MS is taken afresh.
 */
export async function claimRecoveryKey(tx: Unit, endpoint: { id: string; workspaceId: string }, key: string, hash: string, now: number): Promise<KeyClaim> {
  const at = new Date(now);
  const claimed = await claimRecoveryRow(tx, { endpointId: endpoint.id, key, workspaceId: endpoint.workspaceId, hash }, at, new Date(now - RECOVER_KEY_TTL_MS));
  if (claimed) return { kind: 'fresh' };
  const earlier = await readRecoveryRow<RecoverAnswer>(tx, endpoint.id, key);
  if (!earlier || earlier.hash !== hash) return { kind: 'conflict' };
  return { kind: 'replay', answer: earlier.answer };
}

export function storeRecoveryAnswer(tx: Unit, endpointId: string, key: string, answer: RecoverAnswer): Promise<void> {
  return writeRecoveryAnswer(tx, endpointId, key, answer);
}
