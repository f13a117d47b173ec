import type { Database } from '../../persistence/database.ts';
import { untilReachable } from '../../persistence/availability.ts';
import { readPending, readPendingOfMany, type PendingRow } from '../../persistence/stores/webhooks/deliveries.ts';

/** Rows one statement reads at most (the pages of 20 endpoints), so no one result holds every pending delivery. */
const MAX_ROWS_PER_READ = 2_000;

interface Request {
  endpointId: string;
  limit: number;
  resolve: (rows: PendingRow[]) => void;
  reject: (error: unknown) => void;
}

/**
 * Reads the pending deliveries of many endpoints in one statement (again once the database is back, if it
 * cannot be reached: an endpoint's wake comes once): each endpoint's oldest `limit`, in id
 * order, exactly what its own `select … where endpoint_id = ? and status = 'pending' order by id limit ?`
 * would return. One read is in flight at a time; the requests made meanwhile (many endpoints run out of
 * queued deliveries at about the same time) go together into the next ones, up to MAX_ROWS_PER_READ rows each.
 */
export class PendingReader {
  private waiting: Request[] = [];
  private reading = false;

  constructor(private readonly db: Database) {}

  read(endpointId: string, limit: number): Promise<PendingRow[]> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ endpointId, limit, resolve, reject });
      if (!this.reading) {
        this.reading = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.waiting.length > 0) {
        // At most MAX_ROWS_PER_READ rows per statement: after a restart every endpoint asks at once.
        let rows = 0;
        let taken = 0;
        while (taken < this.waiting.length && (taken === 0 || rows + this.waiting[taken]!.limit <= MAX_ROWS_PER_READ)) rows += this.waiting[taken++]!.limit;
        await this.readBatch(this.waiting.splice(0, taken));
      }
    } finally {
      this.reading = false;
    }
  }

  private async readBatch(batch: Request[]): Promise<void> {
    try {
      if (batch.length === 1) {
        const { endpointId, limit } = batch[0]!;
        batch[0]!.resolve(await untilReachable(this.db, () => readPending(this.db, endpointId, limit)));
        return;
      }
      const byRequest = await untilReachable(this.db, () => readPendingOfMany(this.db, batch));
      for (const [i, request] of batch.entries()) request.resolve(byRequest[i]!);
    } catch (error) {
      for (const request of batch) request.reject(error);
    }
  }
}

const readers = new WeakMap<Database, PendingReader>();

/** The pending reader of a database (one per service). */
export function pendingReaderFor(db: Database): PendingReader {
  let reader = readers.get(db);
  if (!reader) {
    reader = new PendingReader(db);
    readers.set(db, reader);
  }
  return reader;
}
