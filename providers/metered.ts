import type { WorkMetrics } from '../runtime/metrics/index.ts';
import type { Provider } from './provider.ts';

/**
 * The provider, with each job it is handed measured from submission to its result: `succeeded` or
 * `failed` as it reports, `refused` when submission throws. A job never reported on (the service stopped
 * first) is not counted.
 */
export function meteredProvider(provider: Provider, metrics: WorkMetrics): Provider {
  return {
    name: provider.name,
    maxConcurrentJobs: provider.maxConcurrentJobs,
    cancel: (providerJobId) => provider.cancel(providerJobId),
    async submit(job, report) {
      const started = performance.now();
      let done = false;
      const seconds = () => (performance.now() - started) / 1000;
      try {
        return await provider.submit(job, (update) => {
          if (!done && update.type !== 'running') {
            done = true;
            metrics.providerCall(provider.name, update.type, seconds());
          }
          report(update);
        });
      } catch (error) {
        if (!done) {
          done = true;
          metrics.providerCall(provider.name, 'refused', seconds());
        }
        throw error;
      }
    },
  };
}
