/**
 * Auto-disable as data and one pure function: an endpoint whose attempts have all failed for
 * `afterMs` (default 5 days, as Svix), or whose last `afterExpired` deliveries all expired (0: no such
 * rule), is disabled with a reason. Any successful attempt resets both.
 */
import type { DeliveryStatus } from '../../persistence/stores/webhooks/rows.ts';

export const DEFAULT_DISABLE_AFTER_MS = 5 * 24 * 3_600_000;

export interface DisablePolicy {
  /** All attempts failing this long disables the endpoint; 0: never. */
  afterMs: number;
  /** This many deliveries expired in a row disables the endpoint; 0: never. */
  afterExpired: number;
}

export interface EndpointHealth {
  /** When the current run of failed attempts began (ms); undefined after a success. */
  failingSince: number | undefined;
  consecutiveExpired: number;
}

export interface HealthVerdict {
  health: EndpointHealth;
  /** The health changed and is to be written (nothing changes, and nothing is written, while attempts succeed). */
  changed: boolean;
  /** Set when the endpoint is to be disabled: why, in words for its operator. */
  disable: string | undefined;
}

/** The endpoint's health after one attempt made at `at`, whose delivery is now `status`. */
export function judgeAttempt(health: EndpointHealth, attempt: { ok: boolean; at: number; status: DeliveryStatus }, policy: DisablePolicy): HealthVerdict {
  if (attempt.ok) {
    const changed = health.failingSince !== undefined || health.consecutiveExpired > 0;
    return { health: { failingSince: undefined, consecutiveExpired: 0 }, changed, disable: undefined };
  }
  const failingSince = health.failingSince ?? attempt.at;
  const consecutiveExpired = health.consecutiveExpired + (attempt.status === 'expired' ? 1 : 0);
  const next = { failingSince, consecutiveExpired };
  const changed = failingSince !== health.failingSince || consecutiveExpired !== health.consecutiveExpired;
  let disable: string | undefined;
  if (policy.afterMs > 0 && attempt.at - failingSince >= policy.afterMs) {
    disable = `every attempt failed for ${describeSpan(attempt.at - failingSince)}, since ${new Date(failingSince).toISOString()}`;
  } else if (policy.afterExpired > 0 && consecutiveExpired >= policy.afterExpired) {
    disable = `${consecutiveExpired} deliveries in a row expired`;
  }
  return { health: next, changed, disable };
}

function describeSpan(ms: number): string {
  const hours = ms / 3_600_000;
  if (hours >= 48) return `${Math.floor(hours / 24)} days`;
  if (hours >= 1) return `${Math.floor(hours)} hours`;
  return `${Math.max(1, Math.floor(ms / 60_000))} minutes`;
}
