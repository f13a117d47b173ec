import { randomBytes } from 'node:crypto';

/** A signed-up user with their first workspace, through the API (as the dashboard would). */
export interface BenchAccount {
  cookie: string;
  workspaceId: string;
}

export async function signUp(serviceUrl: string): Promise<BenchAccount> {
  const res = await fetch(`${serviceUrl}/v1/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: `bench-${randomBytes(6).toString('hex')}@example.com`, password: `pw-${randomBytes(12).toString('hex')}`, name: 'Bench' }),
  });
  if (res.status !== 201) throw new Error(`sign-up failed: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { workspace: { id: string } };
  const cookie = /gs_session=[^;]*/.exec(res.headers.get('set-cookie') ?? '')?.[0];
  if (!cookie) throw new Error('no session cookie');
  return { cookie, workspaceId: body.workspace.id };
}

/** A new API key of the account's workspace; returns its plaintext. */
export async function createKey(serviceUrl: string, account: BenchAccount, scopes: string[], name = 'bench'): Promise<string> {
  const res = await fetch(`${serviceUrl}/v1/api-keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: account.cookie },
    body: JSON.stringify({ workspaceId: account.workspaceId, name, scopes }),
  });
  if (res.status !== 201) throw new Error(`creating an API key failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { key: string }).key;
}
