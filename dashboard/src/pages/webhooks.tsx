import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { currentWorkspaceId } from '../session.ts';
import { ErrorBox, Notice, StatusBadge, useLoad, when } from '../ui.tsx';

const EVENTS = ['generation.completed', 'generation.failed', 'generation.cancelled', 'generation.expired'];

type ShownSecret = { endpointId: string; url: string; secret: string; rotated: boolean; previousSecretExpiresAt?: string | null };
type TestOutcome = { delivered: boolean; responseStatus: number | null; durationMs: number; error: string | null };

function Deliveries({ endpointId, workspaceId }: { endpointId: string; workspaceId: string }) {
  const deliveries = useLoad(
    () => api<{ data: any[] }>('GET', `/v1/webhooks/${encodeURIComponent(endpointId)}/deliveries`, { query: { workspaceId } }),
    [endpointId, workspaceId],
  );
  const [error, setError] = useState<unknown>();
  const [resent, setResent] = useState<string>();
  const resend = async (delivery: any) => {
    setError(undefined);
    setResent(undefined);
    try {
      const created = await api('POST', `/v1/webhooks/${encodeURIComponent(endpointId)}/deliveries/${encodeURIComponent(delivery.id)}/resend`, {
        query: { workspaceId },
      });
      setResent(created.id);
      deliveries.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <section aria-label="Deliveries">
      <div class="row">
        <h3>Deliveries</h3>
        <button type="button" class="secondary" onClick={deliveries.reload}>
          Refresh deliveries
        </button>
      </div>
      <ErrorBox error={deliveries.error} />
      <ErrorBox error={error} />
      {resent && <Notice>Queued a new delivery, {resent}.</Notice>}
      {deliveries.data && deliveries.data.data.length === 0 && <p class="muted">No deliveries yet.</p>}
      {deliveries.data && deliveries.data.data.length > 0 && (
        <div class="scroll">
          <table data-testid="deliveries">
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Generation</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Next attempt</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {deliveries.data.data.map((delivery) => (
                <tr key={delivery.id} data-delivery-id={delivery.id}>
                  <td>
                    {delivery.event}
                    {delivery.resendOf ? (
                      <span class="small muted">
                        {' '}
                        · resend of <span class="mono">{delivery.resendOf}</span>
                      </span>
                    ) : (
                      ''
                    )}
                  </td>
                  <td class="mono small">{delivery.generationId}</td>
                  <td>
                    <StatusBadge status={delivery.status} />
                    {delivery.failureReason ? ` (${delivery.failureReason})` : ''}
                  </td>
                  <td>
                    <ol class="attempts">
                      {delivery.attempts.map((attempt: any) => (
                        <li key={attempt.attemptNumber}>
                          {attempt.responseStatus ?? 'no answer'}
                          {attempt.error ? ` (${attempt.error})` : ''} · {attempt.durationMs} ms · <time dateTime={attempt.at}>{when(attempt.at)}</time>
                        </li>
                      ))}
                    </ol>
                  </td>
                  <td>{when(delivery.nextAttemptAt)}</td>
                  <td>{when(delivery.createdAt)}</td>
                  <td>
                    <button type="button" class="secondary" aria-label={`Resend delivery ${delivery.id}`} onClick={() => resend(delivery)}>
                      Resend
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function TestResult({ outcome }: { outcome: TestOutcome }) {
  return (
    <p class="small" role="status" data-testid="test-outcome">
      Test event: <StatusBadge status={outcome.delivered ? 'delivered' : 'failed'} /> ·{' '}
      {outcome.responseStatus === null ? 'no answer' : `answered ${outcome.responseStatus}`} · {outcome.durationMs} ms
      {outcome.error ? ` · ${outcome.error}` : ''}
    </p>
  );
}

export function WebhooksPage() {
  const workspaceId = currentWorkspaceId();
  const endpoints = useLoad(() => api<{ data: any[] }>('GET', '/v1/webhooks', { query: { workspaceId, limit: 100 } }), [workspaceId]);
  const [secret, setSecret] = useState<ShownSecret>();
  const [copied, setCopied] = useState(false);
  const [open, setOpen] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [testing, setTesting] = useState<string>();
  const [outcomes, setOutcomes] = useState<Record<string, TestOutcome>>({});

  const showSecret = (shown: ShownSecret) => {
    setCopied(false);
    setSecret(shown);
  };
  const copy = async () => {
    if (!secret) return;
    try {
      await navigator.clipboard.writeText(secret.secret);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  const sendTest = async (endpoint: any) => {
    setError(undefined);
    setTesting(endpoint.id);
    try {
      const outcome = await api<TestOutcome>('POST', `/v1/webhooks/${encodeURIComponent(endpoint.id)}/test`, { query: { workspaceId } });
      setOutcomes((previous) => ({ ...previous, [endpoint.id]: outcome }));
    } catch (failure) {
      setError(failure);
    } finally {
      setTesting(undefined);
    }
  };
  const rotate = async (endpoint: any) => {
    setError(undefined);
    try {
      const rotated = await api('POST', `/v1/webhooks/${encodeURIComponent(endpoint.id)}/rotate-secret`, { query: { workspaceId }, body: {} });
      showSecret({
        endpointId: endpoint.id,
        url: endpoint.url,
        secret: rotated.secret,
        rotated: true,
        previousSecretExpiresAt: rotated.previousSecretExpiresAt,
      });
      endpoints.reload();
    } catch (failure) {
      setError(failure);
    }
  };

  const create = async (event: Event) => {
    event.preventDefault();
    const formElement = event.currentTarget as HTMLFormElement;
    const form = new FormData(formElement);
    const description = String(form.get('description') ?? '').trim();
    setError(undefined);
    try {
      const endpoint = await api('POST', '/v1/webhooks', {
        body: { workspaceId, url: form.get('url'), eventTypes: form.getAll('eventTypes').map(String), ...(description ? { description } : {}) },
      });
      showSecret({ endpointId: endpoint.id, url: endpoint.url, secret: endpoint.secret, rotated: false });
      setOpen(endpoint.id);
      formElement.reset();
      endpoints.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const setStatus = async (endpoint: any, status: 'active' | 'disabled') => {
    setError(undefined);
    try {
      await api('PATCH', `/v1/webhooks/${encodeURIComponent(endpoint.id)}`, { body: { workspaceId, status } });
      endpoints.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const remove = async (endpoint: any) => {
    if (!confirm(`Delete the endpoint ${endpoint.url}?`)) return;
    setError(undefined);
    try {
      await api('DELETE', `/v1/webhooks/${encodeURIComponent(endpoint.id)}`, { query: { workspaceId } });
      endpoints.reload();
    } catch (failure) {
      setError(failure);
    }
  };

  return (
    <main>
      <h1>Webhooks</h1>
      {secret && (
        <section class="secret" aria-label={secret.rotated ? 'New signing secret' : 'Signing secret'}>
          {secret.rotated ? (
            <p>
              The new signing secret of {secret.url}, shown this once.{' '}
              {secret.previousSecretExpiresAt ? (
                <>
                  The replaced secret keeps signing beside it until{' '}
                  <time dateTime={secret.previousSecretExpiresAt}>{when(secret.previousSecretExpiresAt)}</time>.
                </>
              ) : (
                'The replaced secret no longer signs.'
              )}
            </p>
          ) : (
            <p>The endpoint's signing secret, shown this once: verify each delivery's signature with it.</p>
          )}
          <code class="mono" data-testid="webhook-secret">
            {secret.secret}
          </code>
          <div class="row">
            <button type="button" onClick={copy}>
              {copied ? 'Copied' : 'Copy secret'}
            </button>
            <button type="button" class="secondary" onClick={() => setSecret(undefined)}>
              I have stored it
            </button>
          </div>
        </section>
      )}
      <ErrorBox error={error} />
      <h2>Add an endpoint</h2>
      <form onSubmit={create}>
        <label>
          URL
          <input name="url" type="url" required placeholder="https://example.com/hooks" />
        </label>
        <fieldset>
          <legend>Events</legend>
          <div class="checks">
            {EVENTS.map((name) => (
              <label key={name} class="check">
                <input type="checkbox" name="eventTypes" value={name} defaultChecked />
                {name}
              </label>
            ))}
          </div>
        </fieldset>
        <label>
          Description (optional)
          <input name="description" maxLength={200} />
        </label>
        <button type="submit">Add endpoint</button>
      </form>
      <h2>Endpoints</h2>
      <ErrorBox error={endpoints.error} />
      {endpoints.data && endpoints.data.data.length === 0 && <p class="muted">No endpoints yet.</p>}
      {endpoints.data?.data.map((endpoint) => (
        <article key={endpoint.id} class="card wide">
          <div class="row">
            <strong class="mono">{endpoint.url}</strong>
            <StatusBadge status={endpoint.status} />
          </div>
          <p class="small muted">
            {endpoint.eventTypes.join(', ')}
            {endpoint.description ? ` · ${endpoint.description}` : ''}
          </p>
          <div class="row">
            <button
              type="button"
              class="secondary"
              aria-expanded={open === endpoint.id}
              onClick={() => setOpen(open === endpoint.id ? undefined : endpoint.id)}
            >
              {open === endpoint.id ? 'Hide deliveries' : 'Show deliveries'}
            </button>
            {endpoint.status === 'disabled' ? (
              <button type="button" class="secondary" onClick={() => setStatus(endpoint, 'active')}>
                Enable
              </button>
            ) : (
              <button type="button" class="secondary" onClick={() => setStatus(endpoint, 'disabled')}>
                Disable
              </button>
            )}
            <button
              type="button"
              class="secondary"
              aria-label={`Send test event to ${endpoint.url}`}
              disabled={testing === endpoint.id}
              onClick={() => sendTest(endpoint)}
            >
              {testing === endpoint.id ? 'Sending test event…' : 'Send test event'}
            </button>
            <button type="button" class="secondary" aria-label={`Rotate secret of ${endpoint.url}`} onClick={() => rotate(endpoint)}>
              Rotate secret
            </button>
            <button type="button" class="danger" onClick={() => remove(endpoint)}>
              Delete
            </button>
          </div>
          {outcomes[endpoint.id] && <TestResult outcome={outcomes[endpoint.id]!} />}
          {open === endpoint.id && <Deliveries endpointId={endpoint.id} workspaceId={workspaceId} />}
        </article>
      ))}
    </main>
  );
}
