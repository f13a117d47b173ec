import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { chooseWorkspace, refreshSession, useSession } from '../session.ts';
import { ErrorBox } from '../ui.tsx';

export function WorkspacesPage() {
  const session = useSession();
  const [error, setError] = useState<unknown>();
  const create = async (event: Event) => {
    event.preventDefault();
    const formElement = event.currentTarget as HTMLFormElement;
    const name = String(new FormData(formElement).get('name') ?? '');
    setError(undefined);
    try {
      const workspace = await api('POST', '/v1/workspaces', { body: { name } });
      formElement.reset();
      await refreshSession(workspace.id);
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <main>
      <h1>Workspaces</h1>
      <table>
        <thead><tr><th scope="col">Name</th><th scope="col">Plan</th><th scope="col">Your role</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
        <tbody>
          {session.workspaces.map((workspace) => (
            <tr key={workspace.id}>
              <td>{workspace.name}{workspace.personal ? ' (personal)' : ''}<div class="muted mono">{workspace.id}</div></td>
              <td>{workspace.plan}</td>
              <td>{workspace.role ?? '—'}</td>
              <td>
                {workspace.id === session.workspaceId
                  ? <strong>Current</strong>
                  : <button type="button" onClick={() => chooseWorkspace(workspace.id)}>Use this workspace</button>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>New workspace</h2>
      <form onSubmit={create} class="inline">
        <label>Name<input name="name" required maxLength={100} /></label>
        <button type="submit">Create workspace</button>
      </form>
      <ErrorBox error={error} />
    </main>
  );
}
