/**
 * A webhook delivery's lifecycle as data and one pure function (docs/webhooks.md, Deliveries): pending,
 * then delivered, failed or expired. `decide` never does I/O: it returns the next
 * state and when the next attempt is due.
 */
import type { DeliveryAttempt, DeliveryStatus } from '../../persistence/stores/webhooks/rows.ts';

export const WEBHOOK_EVENT_TYPES = [
  'generation.completed',
  'generation.failed',
  'generation.cancelled',
  'generation.expired',
  'webhook_endpoint.disabled',
  'budget.threshold_crossed',
] as const;
/** What an endpoint may name in eventTypes: the events above and the opt-in extension generation.started. */
export const SUBSCRIBABLE_EVENT_TYPES = [...WEBHOOK_EVENT_TYPES, 'generation.started'] as const;
export type WebhookEventType = (typeof SUBSCRIBABLE_EVENT_TYPES)[number];

export const MAX_ATTEMPTS = 5;
const BASE_MS = 30_000;
const CAP_MS = 3_600_000;
/** Jitter is up to this share of the backoff, added. */
export const JITTER = 0.1;

export type FailureReason = 'endpoint_disabled' | 'endpoint_deleted' | 'egress_refused';

export function isFinal(status: DeliveryStatus): boolean {
  return status !== 'pending';
}

/** The wait after attempt n (1-based) before attempt n+1: min(30 s × 2^(n-1), 1 h), plus `jitter` (0 to 1) × 10%. */
export function deliveryBackoff(attemptNumber: number, jitter: number): number {
  const base = Math.min(BASE_MS * 2 ** (attemptNumber - 1), CAP_MS);
  return Math.round(base * (1 + JITTER * Math.min(Math.max(jitter, 0), 1)));
}

export interface DeliveryState {
  status: DeliveryStatus;
  attempts: DeliveryAttempt[];
  /** When the next attempt is due (ms since the epoch); undefined once final. */
  nextAttemptAt: number | undefined;
  failureReason: FailureReason | undefined;
}

/** What came of one attempt; `refused` is the egress guard turning the URL down (no retry can help). */
export type AttemptOutcome =
  | { type: 'answered'; status: number; durationMs: number }
  | { type: 'error'; error: string; durationMs: number }
  | { type: 'refused'; error: string; durationMs: number };

export type DeliveryEvent =
  | { type: 'attempted'; at: number; outcome: AttemptOutcome; jitter: number }
  | { type: 'endpoint_disabled' }
  | { type: 'endpoint_deleted' };

export type DeliveryDecision = { ok: true; state: DeliveryState } | { ok: false; reason: string };

export function pendingDelivery(createdAt: number): DeliveryState {
  return { status: 'pending', attempts: [], nextAttemptAt: createdAt, failureReason: undefined };
}

/** The one place where a delivery changes state. */
export function decide(state: DeliveryState, event: DeliveryEvent): DeliveryDecision {
  if (isFinal(state.status)) return { ok: false, reason: `the delivery is already ${state.status}` };
  switch (event.type) {
    case 'endpoint_disabled':
    case 'endpoint_deleted':
      return { ok: true, state: { ...state, status: 'failed', nextAttemptAt: undefined, failureReason: event.type } };
    case 'attempted': {
      const { outcome, at } = event;
      const attempt: DeliveryAttempt = {
        attemptNumber: state.attempts.length + 1,
        at: new Date(at).toISOString(),
        responseStatus: outcome.type === 'answered' ? outcome.status : null,
        error: outcome.type === 'answered' ? (is2xx(outcome.status) ? null : `the endpoint answered ${outcome.status}`) : outcome.error,
        durationMs: Math.max(0, Math.round(outcome.durationMs)),
      };
      const attempts = [...state.attempts, attempt];
      if (outcome.type === 'answered' && is2xx(outcome.status)) {
        return { ok: true, state: { ...state, status: 'delivered', attempts, nextAttemptAt: undefined } };
      }
      if (outcome.type === 'refused') {
        return { ok: true, state: { ...state, status: 'failed', attempts, nextAttemptAt: undefined, failureReason: 'egress_refused' } };
      }
      if (attempts.length >= MAX_ATTEMPTS) {
        return { ok: true, state: { ...state, status: 'expired', attempts, nextAttemptAt: undefined } };
      }
      return { ok: true, state: { ...state, attempts, nextAttemptAt: at + deliveryBackoff(attempt.attemptNumber, event.jitter) } };
    }
  }
}

function is2xx(status: number): boolean {
  return status >= 200 && status <= 299;
}
