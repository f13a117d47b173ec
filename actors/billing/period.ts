/** Billing periods are calendar months in UTC; a start on the 31st ends on the last day of a shorter month. */
export function addMonth(ms: number): number {
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  const month = d.getUTCMonth() + 1;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return Date.UTC(year, month, Math.min(d.getUTCDate(), lastDay), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
}

/** The ledger reference of a subscription period's grant: the unique index makes each period's credits count once. */
export function periodGrantReference(subscriptionId: string, periodStart: number): string {
  return `sub:${subscriptionId}:period:${new Date(periodStart).toISOString()}`;
}
