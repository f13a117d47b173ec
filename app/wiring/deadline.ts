/** Waits for `work`, or `ms` at most: past it, `onLate` says so and the wait ends (the work goes on unwatched). */
export async function withDeadline(work: Promise<void>, ms: number, onLate: () => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      onLate();
      resolve();
    }, ms);
  });
  await Promise.race([work, late]);
  clearTimeout(timer);
}
