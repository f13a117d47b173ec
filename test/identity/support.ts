import type { Test } from 'tap';
import type { TestServer } from '../helpers/server.ts';
import { createAsset } from '../../persistence/assets/store.ts';
import { assetStorageKey } from '../../persistence/blob-store/types.ts';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** One request with a session cookie (or an API key as `Bearer …` when `credential` starts with gs_live_). */
export async function call(server: TestServer, credential: string | undefined, method: Method, path: string, body?: unknown) {
  const headers: Record<string, string> = {};
  if (credential?.startsWith('gs_live_')) headers.authorization = `Bearer ${credential}`;
  else if (credential) headers.cookie = credential;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return server.json(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

/** Rows of a SQL query, straight from the database, to check what a request did (or did not) change. */
export function rows<T = any>(server: TestServer, sql: string, params: unknown[] = []): Promise<T[]> {
  return server.services.db.em().execute(sql, params);
}

/** Everything a workspace's people consist of, as one comparable value: members, invitations, the row itself. */
export async function workspaceState(server: TestServer, workspaceId: string) {
  return {
    workspace: await rows(server, 'select id, name, plan, personal, updated_at from workspaces where id = ?', [workspaceId]),
    members: await rows(server, 'select user_id, role from workspace_members where workspace_id = ? order by user_id', [workspaceId]),
    invitations: await rows(server, 'select id, email, role, status from invitations where workspace_id = ? order by id', [workspaceId]),
    keys: await rows(server, 'select id, revoked_at from api_keys where workspace_id = ? order by id', [workspaceId]),
  };
}

/** Invites a user by e-mail (as `inviter`) and accepts with `invitee`'s session: the way people join workspaces. */
export async function addMember(
  server: TestServer,
  inviterCookie: string,
  workspaceId: string,
  invitee: { cookie: string; email: string },
  role: 'admin' | 'member' = 'member',
): Promise<void> {
  const invitation = await call(server, inviterCookie, 'POST', `/v1/workspaces/${workspaceId}/invitations`, { email: invitee.email, role });
  if (invitation.status !== 201) throw new Error(`invitation failed: ${invitation.status} ${JSON.stringify(invitation.body)}`);
  const accepted = await call(server, invitee.cookie, 'POST', '/v1/invitations/accept', { token: invitation.body.token });
  if (accepted.status !== 200) throw new Error(`acceptance failed: ${accepted.status} ${JSON.stringify(accepted.body)}`);
}

/** Asserts an error answer: status, code, and the envelope with the request id; `expect` is a message pattern or a label. */
export function isError(t: Test, response: { status: number; body: any; headers: Headers }, status: number, code: string, expect?: RegExp | string): void {
  const label = typeof expect === 'string' ? `${expect}: ` : '';
  t.equal(response.status, status, `${label}status ${status} (${code})`);
  t.equal(response.body?.error?.code, code, `${label}code ${code}: ${response.body?.error?.message}`);
  t.equal(typeof response.body?.error?.message, 'string', `${label}a message`);
  t.equal(response.body?.error?.requestId, response.headers.get('x-request-id'), `${label}the request id`);
  if (expect instanceof RegExp) t.match(response.body.error.message, expect);
}

/** A generation row in a given state, as the generation work stores it. */
export async function generation(server: TestServer, workspaceId: string, status: string): Promise<string> {
  const id = `gen_test${Math.random().toString(36).slice(2, 12)}`;
  await rows(
    server,
    `insert into generations (id, workspace_id, mode, model_id, status, params, inputs, payment_mode, credits, provider, timeline, queue_deadline, created_at, updated_at)
    values (?, ?, 'text_to_text', 'test-model', ?, '{}', '{}', 'credits', 1, 'local', '[]', now(), now(), now())`,
    [id, workspaceId, status],
  );
  return id;
}

/** An asset with its file in the blob store, as generation outputs and uploads make them; returns the storage key. */
export async function storedAsset(server: TestServer, workspaceId: string): Promise<string> {
  const id = `ast_test${Math.random().toString(36).slice(2, 12)}`;
  const storageKey = assetStorageKey(workspaceId, id);
  const png = Buffer.from('89504e470d0a1a0a', 'hex');
  await server.services.blobs.put(storageKey, png, 'image/png');
  await server.services.db
    .em()
    .transactional((tx) =>
      createAsset(tx, { id, workspaceId, mediaType: 'image', contentType: 'image/png', bytes: png.length, storageKey, limitBytes: Number.MAX_SAFE_INTEGER }),
    );
  return storageKey;
}
