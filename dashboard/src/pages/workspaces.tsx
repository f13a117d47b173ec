import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { chooseWorkspace, refreshSession, useSession } from '../session.ts';
import { ErrorBox, useLoad, when } from '../ui.tsx';

/** The current workspace's members (roles, removal) and invitations (made with a token shown once, cancelled). */
function Members({ workspaceId, myRole, myUserId }: { workspaceId: string; myRole: string | null; myUserId: string | undefined }) {
  const base = `/v1/workspaces/${encodeURIComponent(workspaceId)}`;
  const members = useLoad(() => api<{ data: any[] }>('GET', `${base}/members`, { query: { limit: 100 } }), [workspaceId]);
  const manager = myRole === 'owner' || myRole === 'admin';
  const invitations = useLoad(
    () => (manager ? api<{ data: any[] }>('GET', `${base}/invitations`, { query: { limit: 100 } }) : Promise.resolve({ data: [] })),
    [workspaceId, manager],
  );
  const [token, setToken] = useState<string>();
  const [error, setError] = useState<unknown>();
  const act = async (work: () => Promise<unknown>) => {
    setError(undefined);
    try {
      await work();
      members.reload();
      invitations.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const invite = (event: Event) => {
    event.preventDefault();
    const formElement = event.currentTarget as HTMLFormElement;
    const form = new FormData(formElement);
    void act(async () => {
      const created = await api('POST', `${base}/invitations`, { body: { email: form.get('email'), role: form.get('role') } });
      setToken(created.token);
      formElement.reset();
    });
  };
  return (
    <section aria-labelledby="members-title">
      <h2 id="members-title">Members</h2>
      <ErrorBox error={members.error ?? error} />
      {members.data && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">E-mail</th>
                <th scope="col">Role</th>
                <th scope="col">Joined</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {members.data.data.map((member) => (
                <tr key={member.userId}>
                  <td>{member.name}</td>
                  <td>{member.email}</td>
                  <td>
                    {manager && member.role !== 'owner' && member.userId !== myUserId ? (
                      <select
                        aria-label={`Role of ${member.email}`}
                        value={member.role}
                        onChange={(event) =>
                          act(() =>
                            api('PATCH', `${base}/members/${encodeURIComponent(member.userId)}`, {
                              body: { role: (event.currentTarget as HTMLSelectElement).value },
                            }),
                          )
                        }
                      >
                        <option value="admin">admin</option>
                        <option value="member">member</option>
                      </select>
                    ) : (
                      member.role
                    )}
                  </td>
                  <td>{when(member.joinedAt)}</td>
                  <td>
                    {manager && member.role !== 'owner' && member.userId !== myUserId && (
                      <button
                        type="button"
                        class="danger"
                        onClick={() =>
                          confirm(`Remove ${member.email} from this workspace?`) &&
                          act(() => api('DELETE', `${base}/members/${encodeURIComponent(member.userId)}`))
                        }
                      >
                        Remove
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {manager && (
        <>
          <h3>Invite someone</h3>
          {token && (
            <div class="secret">
              <p>Give the invitee this token (shown once); they accept it from their Workspaces page.</p>
              <code class="mono" data-testid="invitation-token">
                {token}
              </code>
              <div class="row">
                <button type="button" class="secondary" onClick={() => setToken(undefined)}>
                  Done
                </button>
              </div>
            </div>
          )}
          <form onSubmit={invite} class="inline">
            <label>
              E-mail
              <input name="email" type="email" required />
            </label>
            <label>
              Role
              <select name="role">
                <option value="member">member</option>
                <option value="admin">admin</option>
              </select>
            </label>
            <button type="submit">Invite</button>
          </form>
          {invitations.data && invitations.data.data.length > 0 && (
            <div class="scroll">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Invited</th>
                    <th scope="col">Role</th>
                    <th scope="col">Status</th>
                    <th scope="col">Expires</th>
                    <th scope="col">
                      <span class="sr-only">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {invitations.data.data.map((invitation) => (
                    <tr key={invitation.id}>
                      <td>{invitation.email}</td>
                      <td>{invitation.role}</td>
                      <td>{invitation.status}</td>
                      <td>{when(invitation.expiresAt)}</td>
                      <td>
                        {invitation.status === 'pending' && (
                          <button
                            type="button"
                            class="secondary"
                            onClick={() => act(() => api('DELETE', `${base}/invitations/${encodeURIComponent(invitation.id)}`))}
                          >
                            Cancel
                          </button>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
    </section>
  );
}

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
  const accept = async (event: Event) => {
    event.preventDefault();
    const formElement = event.currentTarget as HTMLFormElement;
    setError(undefined);
    try {
      const accepted = await api('POST', '/v1/invitations/accept', { body: { token: new FormData(formElement).get('token') } });
      formElement.reset();
      await refreshSession(accepted.id);
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <main>
      <h1>Workspaces</h1>
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Plan</th>
            <th scope="col">Your role</th>
            <th scope="col">
              <span class="sr-only">Action</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {session.workspaces.map((workspace) => (
            <tr key={workspace.id}>
              <td>
                {workspace.name}
                {workspace.personal ? ' (personal)' : ''}
                <div class="muted mono">{workspace.id}</div>
              </td>
              <td>{workspace.plan}</td>
              <td>{workspace.role ?? '—'}</td>
              <td>
                {workspace.id === session.workspaceId ? (
                  <strong>Current</strong>
                ) : (
                  <button type="button" onClick={() => chooseWorkspace(workspace.id)}>
                    Use this workspace
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>New workspace</h2>
      <form onSubmit={create} class="inline">
        <label>
          Name
          <input name="name" required maxLength={100} />
        </label>
        <button type="submit">Create workspace</button>
      </form>
      <ErrorBox error={error} />
      <h2>Accept an invitation</h2>
      <form onSubmit={accept} class="inline">
        <label>
          Invitation token
          <input name="token" required maxLength={256} />
        </label>
        <button type="submit">Accept</button>
      </form>
      {session.workspaceId && (
        <Members
          key={session.workspaceId}
          workspaceId={session.workspaceId}
          myUserId={session.user?.id}
          myRole={session.workspaces.find((workspace) => workspace.id === session.workspaceId)?.role ?? null}
        />
      )}
    </main>
  );
}
