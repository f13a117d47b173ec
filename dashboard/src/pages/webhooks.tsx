import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { currentWorkspaceId } from '../session.ts';
import { ErrorBox, StatusBadge, useLoad, when } from '../ui.tsx';

const EVENTS = ['generation.completed', 'generation.failed', 'generation.cancelled', 'generation.expired'];

function Deliveries({ endpointId, workspaceId }: { endpointId: string; workspaceId: string }) {
  const deliveries = useLoad(() => api<{ data: any[] }>('GET', `/v1/webhooks/${encodeURIComponent(endpointId)}/deliveries`, { query: { workspaceId } }), [endpointId, workspaceId]);
  return (
    <section aria-label="Deliveries">
      <div class="row"><h3>Deliveries</h3><button type="button" class="secondary" onClick={deliveries.reload}>Refresh deliveries</button></div>
      <ErrorBox error={deliveries.error} />
      {deliveries.data && deliveries.data.data.length === 0 && <p class="muted">No deliveries yet.</p>}
      {deliveries.data && deliveries.data.data.length > 0 && (
        <div class="scroll">
          <table data-testid="deliveries">
            <thead><tr><th scope="col">Event</th><th scope="col">Generation</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Next attempt</th><th scope="col">Created</th></tr></thead>
            <tbody>
              {deliveries.data.data.map((delivery) => (
                <tr key={delivery.id}>
                  <td>{delivery.event}</td>
                  <td class="mono small">{delivery.generationId}</td>
                  <td><StatusBadge status={delivery.status} />{delivery.failureReason ? ` (${delivery.failureReason})` : ''}</td>
                  <td>
                    <ol class="attempts">
                      {delivery.attempts.map((attempt: any) => (
                        <li key={attempt.attemptNumber}>
                          {attempt.responseStatus ?? 'no answer'}{attempt.error ? ` (${attempt.error})` : ''} · {attempt.durationMs} ms · <time dateTime={attempt.at}>{when(attempt.at)}</time>
                        </li>
                      ))}
                    </ol>
                  </td>
                  <td>{when(delivery.nextAttemptAt)}</td>
                  <td>{when(delivery.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function WebhooksPage() {
  const workspaceId = currentWorkspaceId();
  const endpoints = useLoad(() => api<{ data: any[] }>('GET', '/v1/webhooks', { query: { workspaceId, limit: 100 } }), [workspaceId]);
  const [secret, setSecret] = useState<string>();
  const [open, setOpen] = useState<string>();
  const [error, setError] = useState<unknown>();

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
      setSecret(endpoint.secret);
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
        <section class="secret" aria-label="Signing secret">
          <p>The endpoint's signing secret, shown this once: verify each delivery's signature with it.</p>
          <code class="mono" data-testid="webhook-secret">{secret}</code>
          <div class="row"><button type="button" class="secondary" onClick={() => setSecret(undefined)}>I have stored it</button></div>
        </section>
      )}
      <ErrorBox error={error} />
      <h2>Add an endpoint</h2>
      <form onSubmit={create}>
        <label>URL<input name="url" type="url" required placeholder="https://example.com/hooks" /></label>
        <fieldset>
          <legend>Events</legend>
          <div class="checks">
            {EVENTS.map((name) => <label key={name} class="check"><input type="checkbox" name="eventTypes" value={name} defaultChecked />{name}</label>)}
          </div>
        </fieldset>
        <label>Description (optional)<input name="description" maxLength={200} /></label>
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
          <p class="small muted">{endpoint.eventTypes.join(', ')}{endpoint.description ? ` · ${endpoint.description}` : ''}</p>
          <div class="row">
            <button type="button" class="secondary" aria-expanded={open === endpoint.id} onClick={() => setOpen(open === endpoint.id ? undefined : endpoint.id)}>
              {open === endpoint.id ? 'Hide deliveries' : 'Show deliveries'}
            </button>
            {endpoint.status === 'disabled'
              ? <button type="button" class="secondary" onClick={() => setStatus(endpoint, 'active')}>Enable</button>
              : <button type="button" class="secondary" onClick={() => setStatus(endpoint, 'disabled')}>Disable</button>}
            <button type="button" class="danger" onClick={() => remove(endpoint)}>Delete</button>
          </div>
          {open === endpoint.id && <Deliveries endpointId={endpoint.id} workspaceId={workspaceId} />}
        </article>
      ))}
    </main>
  );
}
