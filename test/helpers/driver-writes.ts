import pg from 'pg';
import type { Test } from 'tap';

/** One call of pg's Client.query (one network write): the client it went through, and the statements it sent, whitespace collapsed. */
export interface DriverWrite {
  client: object;
  texts: string[];
}

/**
 * Records every call of pg's Client.query until `stop()` (or the end of `t`). A pipeline of a direct transaction
 * (persistence/direct-transaction.ts) lists all its statements, BEGIN left out; any other query its one text.
 */
export function recordDriverWrites(t: Test): { writes: DriverWrite[]; stop(): void } {
  const writes: DriverWrite[] = [];
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: object, ...args: unknown[]) {
    const first = args[0] as { text?: string; statements?: Array<{ text: string }> } | string;
    const texts = typeof first === 'string' ? [first] : first.statements ? first.statements.map((s) => s.text) : [first.text ?? String(first)];
    writes.push({ client: this, texts: texts.map((text) => text.trim().replace(/\s+/g, ' ')) });
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  const stop = () => {
    pg.Client.prototype.query = original;
  };
  t.teardown(stop);
  return { writes, stop };
}
