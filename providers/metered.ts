import type { WorkMetrics } from '../runtime/metrics/index.ts';
import type { Provider, ProviderUpdate } from './provider.ts';

/**
 * The provider, with each job it is handed measured from submission to its result: `succeeded` or
 * `failed` as it reports, `refused` when submission throws. A job never reported on (the service stopped
 * first) is not counted.
 */
export function meteredProvider(provider: Provider, metrics: WorkMetrics, deployment?: string, upstreamCostCents?: number): Provider {
  // Each attempt that reached the provider is counted at its deployment's upstream cost, for the operator.
  const cost = (outcome: 'succeeded' | 'failed') => {
    if (deployment !== undefined && upstreamCostCents !== undefined) metrics.attemptCost(provider.name, deployment, outcome, upstreamCostCents);
  };
  const timed = (report: (update: ProviderUpdate) => void) => {
    const started = performance.now();
    let done = false;
    return (update: ProviderUpdate) => {
      if (!done && (update.type === 'succeeded' || update.type === 'failed')) {
        done = true;
        metrics.providerCall(provider.name, update.type, (performance.now() - started) / 1000, deployment);
        cost(update.type);
      }
      report(update);
    };
  };
  return {
    name: provider.name,
    maxConcurrentJobs: provider.maxConcurrentJobs,
    ...(provider.answersWithinRequest ? { answersWithinRequest: true } : {}),
    cancel: (providerJobId) => provider.cancel(providerJobId),
    ...(provider.resume ? { resume: (providerJobId, job, report) => provider.resume!(providerJobId, job, timed(report)) } : {}),
    ...(provider.verifyEvent ? { verifyEvent: provider.verifyEvent.bind(provider) } : {}),
    ...(provider.deliverEvent ? { deliverEvent: provider.deliverEvent.bind(provider) } : {}),
    async submit(job, report) {
      const started = performance.now();
      let done = false;
      const seconds = () => (performance.now() - started) / 1000;
      try {
        return await provider.submit(job, (update) => {
          if (!done && (update.type === 'succeeded' || update.type === 'failed')) {
            done = true;
            metrics.providerCall(provider.name, update.type, seconds(), deployment);
            cost(update.type);
          }
          report(update);
        });
      } catch (error) {
        if (!done) {
          done = true;
          metrics.providerCall(provider.name, 'refused', seconds(), deployment);
        }
        throw error;
      }
    },
  };
}
