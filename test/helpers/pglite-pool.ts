import type { PGlite } from '@electric-sql/pglite';
import { emptyingSql, fingerprintSql, TABLES_SQL } from './database-reset.ts';

/**
 * In-memory PGlites handed back when their server closes them, emptied and checked, for the next server of
 * the same test process: a PGlite's boot from the migrated dump costs 1.2-2 s of CPU (docs/testing.md), an
 * emptying about 20 ms. A process runs many test files one after another (test/groups/), each starting
 * servers, so most of them would otherwise boot one.
 *
 * What a server gets is what a fresh boot from the dump gives: every table of the service empty, the
 * migrations' own table as migrated, no session state (DISCARD ALL: prepared statements, settings, temporary
 * tables, advisory locks, LISTEN; then the search path PGlite's start sets). An instance whose schema,
 * functions, triggers, roles, statistics or migrations differ afterwards from the dump's (a test that changed
 * them, say a trigger that makes writes fail) is closed instead, as is one that could not be emptied.
 */
export class PglitePool {
  private readonly idle: PGlite[] = [];
  /** Instances handed out whose close() has been called since (kept idle, or closed). */
  private readonly returned = new WeakSet<PGlite>();
  private image: Promise<{ fingerprint: string; emptying: string }> | undefined;

  /** `boot`: a new PGlite loaded from the migrated dump. `keep`: how many idle instances to hold at most. */
  constructor(
    private readonly boot: () => Promise<PGlite>,
    private readonly keep = 2,
  ) {}

  /** A migrated PGlite with nothing in it; its close() empties it and hands it back here. */
  async take(): Promise<PGlite> {
    let instance = this.idle.pop();
    if (!instance) {
      instance = await this.boot();
      await instance.waitReady;
      // The first boot of the process is what every later one must look like.
      this.image ??= imageOf(instance);
      await this.image;
    }
    this.lend(instance);
    return instance;
  }

  /** Whether `instance`'s borrower closed it (it is then idle here, emptied, or closed for good). */
  closedByBorrower(instance: PGlite): boolean {
    return this.returned.has(instance);
  }

  /** How many are idle (for the pool's own test). */
  get idleCount(): number {
    return this.idle.length;
  }

  private lend(instance: PGlite): void {
    this.returned.delete(instance);
    const own = instance as PGlite & { close: PGlite['close'] };
    own.close = async () => {
      this.returned.add(instance);
      // Its own close again (the prototype's), for the next borrower and for a real close.
      delete (own as Partial<typeof own>).close;
      // Room looked at again after the emptying: other closes may have filled it meanwhile.
      if (this.idle.length < this.keep && (await this.emptied(instance)) && this.idle.length < this.keep) this.idle.push(instance);
      else await instance.close();
    };
  }

  private async emptied(instance: PGlite): Promise<boolean> {
    // WebAssembly memory only grows: one a heavy test made large is let go rather than kept.
    if (instance.closed || heapBytes(instance) > MAX_KEPT_HEAP) return false;
    try {
      const { fingerprint, emptying } = await this.image!;
      // A transaction left open (a warning, not an error, when there is none).
      await instance.exec('ROLLBACK');
      // DISCARD ALL resets the search path to PGlite's command line (pg_catalog): its start sets public.
      await instance.exec('DISCARD ALL');
      await instance.exec('SET search_path TO public');
      await instance.exec(emptying);
      return (await fingerprintOf(instance)) === fingerprint;
    } catch {
      return false;
    }
  }
}

/** The largest WebAssembly heap kept idle: a fresh one is about 180 MB. */
const MAX_KEPT_HEAP = 512 * 1024 * 1024;

function heapBytes(instance: PGlite): number {
  return (instance as PGlite & { mod?: { HEAPU8?: Uint8Array } }).mod?.HEAPU8?.byteLength ?? 0;
}

/** What a fresh boot looks like, and the statements that bring a used instance back to it. */
async function imageOf(instance: PGlite): Promise<{ fingerprint: string; emptying: string }> {
  const tables = await instance.query<{ name: string }>(TABLES_SQL);
  return { fingerprint: await fingerprintOf(instance), emptying: emptyingSql(tables.rows.map((t) => t.name)) };
}

const FINGERPRINT = fingerprintSql(true);

async function fingerprintOf(instance: PGlite): Promise<string> {
  // Names printed schema and all, whatever the search path (set for this transaction only).
  return instance.transaction(async (tx) => {
    await tx.exec('SET LOCAL search_path = pg_catalog');
    const { rows } = await tx.query<{ fingerprint: string }>(FINGERPRINT);
    return rows[0]!.fingerprint;
  });
}
