import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { currentWorkspaceId } from '../session.ts';
import { ErrorBox, useLoad, when } from '../ui.tsx';

const SCOPES = ['generations.write', 'generations.read', 'files.write', 'assets.read', 'usage.read', 'wallet.read', 'wallet.write', 'webhooks.manage', 'all'];

interface Key {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  expiresAt: string | null;
  revoked: boolean;
  lastUsedAt: string | null;
  createdAt: string;
}

export function KeysPage() {
  const workspaceId = currentWorkspaceId();
  const keys = useLoad(() => api<{ data: Key[] }>('GET', '/v1/api-keys', { query: { workspaceId, limit: 100 } }), [workspaceId]);
  const [created, setCreated] = useState<{ name: string; key: string }>();
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState<unknown>();
  const [usage, setUsage] = useState<{ id: string; data: any }>();

  const create = async (event: Event) => {
    event.preventDefault();
    const formElement = event.currentTarget as HTMLFormElement;
    const form = new FormData(formElement);
    const scopes = form.getAll('scopes').map(String);
    const expires = String(form.get('expiresAt') ?? '');
    setError(undefined);
    try {
      const key = await api('POST', '/v1/api-keys', {
        body: { workspaceId, name: form.get('name'), scopes, ...(expires ? { expiresAt: new Date(`${expires}T23:59:59Z`).toISOString() } : {}) },
      });
      setCreated({ name: key.name, key: key.key });
      setCopied(false);
      formElement.reset();
      keys.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const revoke = async (key: Key) => {
    if (!confirm(`Revoke the key "${key.name}"? Requests made with it will be refused from now on.`)) return;
    setError(undefined);
    try {
      await api('DELETE', `/v1/api-keys/${encodeURIComponent(key.id)}`, { query: { workspaceId } });
      keys.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const showUsage = async (key: Key) => {
    setError(undefined);
    try {
      setUsage({ id: key.id, data: await api('GET', `/v1/api-keys/${encodeURIComponent(key.id)}/usage`, { query: { workspaceId } }) });
    } catch (failure) {
      setError(failure);
    }
  };
  const copy = async () => {
    if (!created) return;
    try {
      await navigator.clipboard.writeText(created.key);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };

  return (
    <main>
      <h1>API keys</h1>
      {created && (
        <section class="secret" aria-labelledby="new-key-title">
          <h2 id="new-key-title">Your new key "{created.name}"</h2>
          <p>Copy it now: it is shown this once and cannot be read again.</p>
          <code class="mono" data-testid="new-key">
            {created.key}
          </code>
          <div class="row">
            <button type="button" onClick={copy}>
              {copied ? 'Copied' : 'Copy key'}
            </button>
            <button type="button" class="secondary" onClick={() => setCreated(undefined)}>
              I have stored it
            </button>
          </div>
        </section>
      )}
      <ErrorBox error={error} />
      <h2>Create a key</h2>
      <form onSubmit={create}>
        <label>
          Name
          <input name="name" required maxLength={100} placeholder="e.g. production server" />
        </label>
        <fieldset>
          <legend>Scopes</legend>
          <div class="checks">
            {SCOPES.map((scope) => (
              <label key={scope} class="check">
                <input type="checkbox" name="scopes" value={scope} defaultChecked={scope === 'all'} />
                {scope}
              </label>
            ))}
          </div>
        </fieldset>
        <label>
          Expires on (optional)
          <input name="expiresAt" type="date" />
        </label>
        <button type="submit">Create key</button>
      </form>
      <h2>Keys</h2>
      <ErrorBox error={keys.error} />
      {keys.data && keys.data.data.length === 0 && <p class="muted">No keys yet.</p>}
      {keys.data && keys.data.data.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Scopes</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.data.data.map((key) => (
                <tr key={key.id}>
                  <td>{key.name}</td>
                  <td class="mono">{key.prefix}…</td>
                  <td>{key.scopes.join(', ')}</td>
                  <td>{when(key.createdAt)}</td>
                  <td>{when(key.lastUsedAt)}</td>
                  <td>{key.revoked ? 'revoked' : key.expiresAt && new Date(key.expiresAt) < new Date() ? 'expired' : 'active'}</td>
                  <td class="row">
                    <button type="button" class="secondary" onClick={() => showUsage(key)}>
                      Usage
                    </button>
                    {!key.revoked && (
                      <button type="button" class="danger" onClick={() => revoke(key)}>
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {usage && (
        <section aria-label="Key usage">
          <h3>Usage of {keys.data?.data.find((key) => key.id === usage.id)?.name ?? usage.id}</h3>
          <pre class="mono">{JSON.stringify(usage.data, null, 2)}</pre>
        </section>
      )}
    </main>
  );
}
