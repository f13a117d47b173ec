import type { AdapterUpdate } from '../../providers/adapter.ts';

/** What a provider adapter reported of one job, as a test collects it. */
export interface Recorder {
  updates: AdapterUpdate[];
  /** The adapter's `report` for the job. */
  report(update: AdapterUpdate): void;
  /** The job's terminal update; rejects, naming the updates seen, if none came within the guard. */
  ended: Promise<AdapterUpdate>;
  /** Every terminal update reported (a job ends once: more than one is a defect). */
  terminals(): AdapterUpdate[];
}

const isTerminal = (update: AdapterUpdate) => update.type === 'succeeded' || update.type === 'failed';

/** Collects a job's updates; `ended` resolves with its first terminal one (or rejects after `guardMs`). */
export function recorder(guardMs = 10_000): Recorder {
  const updates: AdapterUpdate[] = [];
  let resolve!: (update: AdapterUpdate) => void;
  const ended = new Promise<AdapterUpdate>((r, reject) => {
    resolve = r;
    setTimeout(() => reject(new Error(`no terminal update after ${guardMs} ms; got ${JSON.stringify(updates)}`)), guardMs).unref();
  });
  ended.catch(() => undefined); // a test that expects no end never awaits it
  return {
    updates,
    report(update) {
      updates.push(update);
      if (isTerminal(update)) resolve(update);
    },
    ended,
    terminals: () => updates.filter(isTerminal),
  };
}
