import type { FastHistogram } from './histograms.ts';
import { AttributeCache, FastCounter, LONG_SECONDS_BUCKETS, secondsHistogram, type Instruments } from './instruments.ts';

/** Statuses the generations gauge reports (0 when none): the unfinished ones. Finished jobs are counted by transitions. */
const ACTIVE_STATUSES = ['queued', 'reserved', 'submitted', 'running'];
/** A scrape does not wait longer than this for the database: the gauges are left out of that one. */
const QUERY_DEADLINE_MS = 2_000;

/** Where the work gauges come from (database counts), read when metrics are collected. */
export interface WorkSources {
  activeGenerations(): Promise<Map<string, number>>;
  pendingDeliveries(): Promise<number>;
}

/** How a webhook attempt ended: a 2xx, another status, no answer (network, time-out), or refused by the egress guard. */
export type WebhookAttemptOutcome = 'success' | 'http_error' | 'network_error' | 'refused';
/** How a provider job ended: succeeded, failed (reported by the provider), or refused at submission. */
export type ProviderCallOutcome = 'succeeded' | 'failed' | 'refused';

/** Generations, provider calls and webhook attempts. */
export class WorkMetrics {
  private readonly transitions: FastCounter<Record<string, string>>;
  private readonly providerDuration: FastHistogram;
  private readonly attemptCosts: FastCounter<Record<string, string>>;
  private readonly attemptDuration: FastHistogram;
  private readonly providerAttributes = new AttributeCache<Record<string, string>>();
  private readonly attemptAttributes = new AttributeCache<Record<string, string>>();

  constructor(instruments: Instruments, sources: WorkSources, onError: (error: unknown) => void) {
    this.transitions = new FastCounter(instruments, 'gs.generation.transitions', {
      description: 'Generation status changes, by status left (`new` for a created job) and status entered.',
      unit: '{transition}',
    });
    this.providerDuration = secondsHistogram(
      instruments,
      'gs.provider.call.duration',
      'Provider jobs from submission to their result (its count is the calls), by provider and outcome.',
      LONG_SECONDS_BUCKETS,
    );
    this.attemptCosts = new FastCounter(instruments, 'gs.provider.attempt.costs', {
      description:
        "What provider attempts cost upstream, in US cents, by provider, deployment and outcome: each attempt that reached its provider at its deployment's upstreamCostCents (the catalog's).",
      unit: '{cent}',
    });
    this.attemptDuration = secondsHistogram(instruments, 'gs.webhook.attempt.duration', 'Webhook delivery attempts (its count is the attempts), by outcome.');
    const generations = instruments.meter.createObservableGauge('gs.generations', {
      description: 'Unfinished generations in the database, by status.',
      unit: '{generation}',
    });
    const pending = instruments.meter.createObservableGauge('gs.webhook.deliveries.pending', {
      description: 'Webhook deliveries in the database waiting to be delivered (not yet succeeded or failed).',
      unit: '{delivery}',
    });
    instruments.meter.addBatchObservableCallback(
      async (result) => {
        try {
          const [counts, waiting] = await withDeadline(Promise.all([sources.activeGenerations(), sources.pendingDeliveries()]));
          for (const status of ACTIVE_STATUSES) result.observe(generations, counts.get(status) ?? 0, { 'generation.status': status });
          result.observe(pending, waiting);
        } catch (error) {
          onError(error);
        }
      },
      [generations, pending],
    );
  }

  generationTransition(from: string, to: string): void {
    this.transitions.add(1, `${from} ${to}`, () => ({ 'generation.status.from': from, 'generation.status.to': to }));
  }

  /** `deployment`: the catalog deployment the job ran on (absent for the built-in local provider's). */
  providerCall(provider: string, outcome: ProviderCallOutcome, seconds: number, deployment?: string): void {
    this.providerDuration.record(
      seconds,
      this.providerAttributes.get(`${provider} ${outcome} ${deployment ?? ''}`, () => ({
        'gs.provider': provider,
        'gs.outcome': outcome,
        ...(deployment ? { 'gs.deployment': deployment } : {}),
      })),
    );
  }

  /** An attempt that reached its provider, at its deployment's upstream cost. */
  attemptCost(provider: string, deployment: string, outcome: ProviderCallOutcome, cents: number): void {
    this.attemptCosts.add(cents, `${provider} ${deployment} ${outcome}`, () => ({
      'gs.provider': provider,
      'gs.deployment': deployment,
      'gs.outcome': outcome,
    }));
  }

  webhookAttempt(outcome: WebhookAttemptOutcome, seconds: number): void {
    this.attemptDuration.record(
      seconds,
      this.attemptAttributes.get(outcome, () => ({ 'gs.outcome': outcome })),
    );
  }
}

function withDeadline<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`database counts took longer than ${QUERY_DEADLINE_MS} ms`)), QUERY_DEADLINE_MS);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
