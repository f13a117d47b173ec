import type { FastHistogram } from './histograms.ts';
import { COUNT_BUCKETS, secondsHistogram, type Instruments } from './instruments.ts';

/** What the database's connection pool reports, read when metrics are collected. */
export interface PoolCounts {
  used: number;
  idle: number;
  pending: number;
}

/** Group-commit batches (persistence/group-commit.ts) and the connection pool. */
export class PersistenceMetrics {
  private readonly batchSize: FastHistogram;
  private readonly commitDuration: FastHistogram;

  constructor(instruments: Instruments, pool: () => PoolCounts | undefined, available: () => boolean | undefined = () => undefined) {
    this.batchSize = instruments.histograms.histogram(
      'gs.db.batch.size',
      'Actor writes committed together in one group-commit transaction.',
      '{write}',
      COUNT_BUCKETS,
    );
    this.commitDuration = secondsHistogram(
      instruments,
      'gs.db.commit.duration',
      'Time from a group-commit batch starting to its transaction committing (retries while the database is unreachable included).',
    );
    const connections = instruments.meter.createObservableGauge('db.client.connection.count', {
      description: 'Connections of the database pool, by state (used, idle).',
      unit: '{connection}',
    });
    const pending = instruments.meter.createObservableGauge('db.client.connection.pending_requests', {
      description: 'Requests waiting for a connection of the database pool.',
      unit: '{request}',
    });
    // 1 while this node reaches the database, 0 during an outage: what an alert on a database outage reads.
    instruments.meter
      .createObservableGauge('gs.db.available', { description: 'Whether this node reaches the database: 1 yes, 0 during an outage.', unit: '1' })
      .addCallback((result) => {
        const up = available();
        if (up !== undefined) result.observe(up ? 1 : 0);
      });
    const used = { 'db.client.connection.state': 'used' };
    const idle = { 'db.client.connection.state': 'idle' };
    instruments.meter.addBatchObservableCallback(
      (result) => {
        const counts = pool();
        if (!counts) return;
        result.observe(connections, counts.used, used);
        result.observe(connections, counts.idle, idle);
        result.observe(pending, counts.pending);
      },
      [connections, pending],
    );
  }

  /** One batch committed: its size and how long it took. */
  committed(size: number, seconds: number): void {
    this.batchSize.record(size);
    this.commitDuration.record(seconds);
  }
}
