/**
 * How many operations are under way per key (for example webhook attempts on the wire per workspace):
 * work that runs beside an actor's mailbox, which a drain must let end before the actor's state moves on.
 */
export class InFlightCounter {
  private readonly counts = new Map<string, number>();

  begin(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  end(key: string): void {
    const left = (this.counts.get(key) ?? 0) - 1;
    if (left > 0) this.counts.set(key, left);
    else this.counts.delete(key);
  }

  /** Operations under way for the keys that match. */
  count(matches: (key: string) => boolean): number {
    let total = 0;
    for (const [key, n] of this.counts) if (matches(key)) total += n;
    return total;
  }
}
