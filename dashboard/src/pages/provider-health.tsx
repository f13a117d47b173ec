import { useEffect } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorBox, useLoad, when } from '../ui.tsx';

interface Breaker {
  deploymentId: string;
  modelId: string;
  provider: string;
  state: 'closed' | 'open' | 'half_open' | 'unconfigured';
  calls: number;
  failures: number;
  failureRatio: number;
  openUntil: string | null;
  cooldownMs: number;
  probing: boolean;
}

/** How often the page reads the breakers again: an open one changes within its cool-down. */
const REFRESH_MS = 5_000;

const STATE_LABELS: Record<Breaker['state'], string> = { closed: 'closed', open: 'open', half_open: 'half-open', unconfigured: 'not configured' };

function seconds(ms: number): string {
  return ms === 0 ? '—' : `${Math.round(ms / 1000)} s`;
}

/** The circuit breaker of every provider deployment (GET /v1/breakers), read again every 5 seconds. */
export function ProviderHealthPage() {
  const breakers = useLoad(() => api<{ breakers: Breaker[]; at: string }>('GET', '/v1/breakers'), []);
  const { reload } = breakers;
  useEffect(() => {
    const timer = setInterval(reload, REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);
  const list = breakers.data?.breakers;
  // A deployment whose provider is not configured here sends no job, by configuration: not a breaker's doing.
  const unhealthy = list?.filter((breaker) => breaker.state === 'open' || breaker.state === 'half_open').length ?? 0;
  return (
    <main>
      <h1>Provider health</h1>
      <p class="muted">
        Each deployment's circuit breaker: <strong>closed</strong> sends jobs, <strong>open</strong> sends none until its cool-down ends,{' '}
        <strong>half-open</strong> lets one job through to try it. Only failures of the provider count (outages, time-outs, rate limits, errors, bad answers, a
        refused key); refused prompts never do.
      </p>
      <ErrorBox error={breakers.error} />
      {list && (
        <p role="status" data-testid="health-summary">
          {unhealthy === 0 ? `All ${list.length} deployments are closed.` : `${unhealthy} of ${list.length} deployments are not closed.`}
        </p>
      )}
      {list && list.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Deployment</th>
                <th scope="col">Model</th>
                <th scope="col">Provider</th>
                <th scope="col">State</th>
                <th scope="col">Calls in window</th>
                <th scope="col">Failure ratio</th>
                <th scope="col">Open until</th>
                <th scope="col">Cool-down</th>
              </tr>
            </thead>
            <tbody>
              {list.map((breaker) => (
                <tr key={breaker.deploymentId} data-deployment={breaker.deploymentId}>
                  <td class="mono">{breaker.deploymentId}</td>
                  <td>{breaker.modelId}</td>
                  <td>{breaker.provider}</td>
                  <td>
                    <span class={`badge badge-breaker-${breaker.state}`} data-state={breaker.state}>
                      {STATE_LABELS[breaker.state]}
                    </span>
                    {breaker.probing && <span class="muted small"> (a job is trying it)</span>}
                  </td>
                  <td>{breaker.calls}</td>
                  <td>{breaker.calls === 0 ? '—' : `${Math.round(breaker.failureRatio * 100)} % (${breaker.failures} failed)`}</td>
                  <td>{when(breaker.openUntil)}</td>
                  <td>{seconds(breaker.cooldownMs)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {breakers.data && (
        <p class="muted small">
          Read at {when(breakers.data.at)}; refreshed every {REFRESH_MS / 1000} seconds.
        </p>
      )}
    </main>
  );
}
