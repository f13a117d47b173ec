/** Billing periods are calendar months in UTC; a start on the 31st ends on the last day of a shorter month. */
export function addMonths(ms: number, months: number): number {
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  const month = d.getUTCMonth() + months;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return Date.UTC(year, month, Math.min(d.getUTCDate(), lastDay), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
}

export function addMonth(ms: number): number {
  return addMonths(ms, 1);
}

/**
 * The end of the period after the one ending at `currentEnd`, counted in whole months from the
 * subscription's start (its anchor), so a subscription started on the 31st ends each period on the 31st
 * or the last day of a shorter month, never drifting to the 28th.
 */
export function nextPeriodEnd(anchor: number, currentEnd: number): number {
  let months = 1;
  while (addMonths(anchor, months) <= currentEnd) months++;
  return addMonths(anchor, months);
}

/** The ledger reference of a subscription period's grant: the unique index makes each period's credits count once. */
export function periodGrantReference(subscriptionId: string, periodStart: number): string {
  return `sub:${subscriptionId}:period:${new Date(periodStart).toISOString()}`;
}
