import type { FastHistogram } from './histograms.ts';
import { AttributeCache, FastCounter, secondsHistogram, type Instruments } from './instruments.ts';

/** What the actor directory reports per kind, read when metrics are collected. */
export interface ActorCensus {
  /** Live actors and messages waiting or being handled, by kind. */
  census(): Map<string, { live: number; pending: number }>;
}

/** Actor metrics: messages and their processing time by kind, passivations; live actors and mailbox depth observed. */
export class ActorMetrics {
  private readonly processing: FastHistogram;
  private readonly passivations: FastCounter<{ 'actor.kind': string }>;
  private readonly kinds = new AttributeCache<{ 'actor.kind': string }>();
  private directory: ActorCensus | undefined;

  constructor(instruments: Instruments) {
    this.processing = secondsHistogram(
      instruments,
      'gs.actor.message.duration',
      'Time an actor took to handle one message (its count is the messages handled), by actor kind.',
    );
    this.passivations = new FastCounter(instruments, 'gs.actor.passivations', {
      description: 'Actors stopped (idle, finished, or their shard left this node), by actor kind.',
      unit: '{actor}',
    });
    const live = instruments.meter.createObservableGauge('gs.actor.live', { description: 'Live actors, by actor kind.', unit: '{actor}' });
    const depth = instruments.meter.createObservableGauge('gs.actor.mailbox.depth', {
      description: 'Messages waiting in the mailboxes or being handled, by actor kind.',
      unit: '{message}',
    });
    instruments.meter.addBatchObservableCallback(
      (result) => {
        if (!this.directory) return;
        for (const [kind, counts] of this.directory.census()) {
          const attributes = this.attributesOf(kind);
          result.observe(live, counts.live, attributes);
          result.observe(depth, counts.pending, attributes);
        }
      },
      [live, depth],
    );
  }

  observe(directory: ActorCensus): void {
    this.directory = directory;
  }

  message(kind: string, seconds: number): void {
    this.processing.record(seconds, this.attributesOf(kind));
  }

  passivated(kind: string): void {
    this.passivations.add(1, kind, () => this.attributesOf(kind));
  }

  private attributesOf(kind: string): { 'actor.kind': string } {
    return this.kinds.get(kind, () => ({ 'actor.kind': kind }));
  }
}
