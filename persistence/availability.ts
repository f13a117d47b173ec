import type { Database } from './database.ts';

/** Error codes of a database that cannot be reached: the socket's, and PostgreSQL's SQLSTATE (class 08 and the 57P0x shutdowns). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // admin_shutdown, crash_shutdown, cannot_connect_now (starting up, shutting down, in recovery)
  '57P01',
  '57P02',
  '57P03',
]);

/** What pg, knex and the server say when the connection, not the statement, failed. */
const UNREACHABLE_MESSAGES = new RegExp(
  [
    'Connection terminated',
    'Connection ended unexpectedly',
    'connection error and is not queryable',
    'Client was closed and is not queryable',
    'Timeout acquiring a connection',
    'terminating connection due to administrator command',
    'the database system is (?:starting up|shutting down|in recovery|not yet accepting connections)',
    // knex, for a statement in a transaction whose BEGIN failed: the BEGIN's own error (a dead pooled
    // connection) is not what the statement sees.
    'Transaction query already complete',
  ].join('|'),
  'i',
);

/**
 * Whether an error means the database could not be reached (refused, reset or dropped connection, server
 * shutting down or starting up, no pooled connection in time), as opposed to a statement the database
 * answered with an error. Looks through `cause` and the errors of an AggregateError.
 */
export function isDatabaseUnreachable(error: unknown, depth = 0): boolean {
  if (depth > 4 || typeof error !== 'object' || error === null) return false;
  const { code, message, cause, errors } = error as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
  if (typeof message === 'string' && UNREACHABLE_MESSAGES.test(message)) return true;
  if (Array.isArray(errors) && errors.some((e) => isDatabaseUnreachable(e, depth + 1))) return true;
  return isDatabaseUnreachable(cause, depth + 1);
}

/** A request found the database unreachable: HTTP answers 503 service_unavailable with Retry-After. */
export class DatabaseUnavailableError extends Error {
  constructor(cause?: unknown) {
    super('the database cannot be reached', { cause });
    this.name = 'DatabaseUnavailableError';
  }
}

const PROBE_FIRST_MS = 100;
const PROBE_MAX_MS = 1_000;
const PROBE_TIMEOUT_MS = 2_000;

/**
 * Whether the database is reachable, as last seen. It goes down when something finds it unreachable
 * (`down`); from then on a probe pings it (100 ms, doubling to 1 s between tries) and it goes up again at
 * the first answer, or at the first commit that succeeds (`up`). Writers waiting for it (`whenUp`) go on
 * at once then.
 */
export class DatabaseAvailability {
  private isUp = true;
  private since = 0;
  private lastError: string | undefined;
  private waiters: Array<() => void> = [];
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private closed = false;

  constructor(
    private readonly ping: () => Promise<void>,
    private readonly now: () => number = Date.now,
  ) {}

  get available(): boolean {
    return this.isUp;
  }

  /** The service is stopping: nothing waits for the database any more. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** When it went down (ms since the epoch), and why; undefined while it is up. */
  get outage(): { since: number; error: string | undefined } | undefined {
    return this.isUp ? undefined : { since: this.since, error: this.lastError };
  }

  down(error?: unknown): void {
    if (error !== undefined) this.lastError = (error as Error)?.message ?? String(error);
    if (this.closed || !this.isUp) return;
    this.isUp = false;
    this.since = this.now();
    this.probe(PROBE_FIRST_MS);
  }

  up(): void {
    if (this.isUp) return;
    this.isUp = true;
    this.lastError = undefined;
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.wake();
  }

  /** Resolves once the database is up again (at once if it is), or when this is closed. */
  whenUp(): Promise<void> {
    if (this.isUp || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Stops probing and lets every waiter go: the service is stopping. */
  close(): void {
    this.closed = true;
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.wake();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private probe(delayMs: number): void {
    if (this.closed || this.isUp || this.probing) return;
    clearTimeout(this.probeTimer);
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      this.probing = true;
      void withTimeout(this.ping(), PROBE_TIMEOUT_MS).then(
        () => {
          this.probing = false;
          this.up();
        },
        (error: unknown) => {
          this.probing = false;
          this.lastError = (error as Error)?.message ?? String(error);
          this.probe(Math.min(delayMs * 2, PROBE_MAX_MS));
        },
      );
    }, delayMs);
    this.probeTimer.unref();
  }
}

const availabilities = new WeakMap<Database, DatabaseAvailability>();

/** The availability of a database (one per database handle, shared by everything that uses it). */
export function availabilityOf(db: Database): DatabaseAvailability {
  let availability = availabilities.get(db);
  if (!availability) {
    availability = new DatabaseAvailability(() => db.ping());
    availabilities.set(db, availability);
  }
  return availability;
}

/**
 * Runs `work` until it does not fail for an unreachable database: after such a failure the database is
 * marked down and `work` runs again once it is back (or, at the latest, after a capped backoff). For work
 * nobody can redo later, such as an actor's reads on behalf of a provider's one-time report. Gives up,
 * rethrowing, when `stop()` says so or the availability is closed (the service is stopping).
 */
export async function untilReachable<T>(db: Database, work: () => Promise<T>, stop: () => boolean = () => false): Promise<T> {
  const availability = availabilityOf(db);
  const giveUp = () => stop() || availability.isClosed;
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!isDatabaseUnreachable(error) || giveUp()) throw error;
      availability.down(error);
      await pause(availability, attempt);
      if (giveUp()) throw error;
    }
  }
}

/** Backoff after the attempt-th failure (100 ms doubling to 5 s), cut short when the database comes back. */
export function pause(availability: DatabaseAvailability, attempt: number): Promise<void> {
  const ms = Math.min(100 * 2 ** Math.min(attempt, 10), 5_000);
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    void availability.whenUp().then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out')), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
