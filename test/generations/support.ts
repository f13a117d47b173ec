import type { Test } from 'tap';
import { newId } from '../../persistence/ids.ts';
import { GenerationEntity, type GenerationRow } from '../../persistence/entities/generation.ts';
import type { TestServer } from '../helpers/server.ts';
import { createKey, type SignedUp } from '../helpers/identity.ts';
import type { Scope } from '../../http/route.ts';

/** A generation row as the write side would store it; the create endpoint is not used, so reads are tested alone. */
export function generationRow(workspaceId: string, overrides: Partial<GenerationRow> = {}): GenerationRow {
  const createdAt = overrides.createdAt ?? new Date(Date.UTC(2026, 0, 1));
  const status = overrides.status ?? 'queued';
  return {
    id: newId('gen', createdAt.getTime()),
    workspaceId,
    apiKeyId: null,
    userId: null,
    mode: 'text_to_text',
    modelId: 'local/text-mini',
    status,
    params: { prompt: 'hello', temperature: 1, maxTokens: 256 },
    inputs: {},
    paymentMode: 'credits',
    credits: 1,
    project: null,
    idempotencyKey: null,
    provider: 'local',
    deploymentId: 'local-text-mini',
    tokenTerms: null,
    usage: null,
    providerJobId: null,
    attempts: 0,
    textOutput: null,
    outputAssetIds: [],
    errorCode: null,
    errorMessage: null,
    timeline: [{ status: 'queued', at: createdAt.toISOString() }],
    queueDeadline: new Date(createdAt.getTime() + 600_000),
    createdAt,
    updatedAt: createdAt,
    startedAt: null,
    completedAt: null,
    ...overrides,
  };
}

export async function insertGenerations(server: TestServer, rows: GenerationRow[]): Promise<GenerationRow[]> {
  const em = server.services.db.em();
  for (const row of rows) await em.insert(GenerationEntity, row);
  return rows;
}

export async function setPlan(server: TestServer, workspaceId: string, plan: string): Promise<void> {
  await server.services.db.em().execute('update workspaces set plan = ? where id = ?', [plan, workspaceId]);
}

/** GET with a key (gs_live_…), a session cookie, or nothing. */
export function get(server: TestServer, path: string, credential?: string) {
  const headers: Record<string, string> = {};
  if (credential?.startsWith('gs_live_') || credential?.startsWith('Bearer'))
    headers.authorization = credential.startsWith('Bearer') ? credential : `Bearer ${credential}`;
  else if (credential) headers.cookie = credential;
  return server.json(path, { headers });
}

export interface MatrixCase {
  /** The route's path, without workspaceId: keys name theirs (or another, or none) in the query. */
  path: string;
  /** Scopes that must be granted (any of them); `all` always is. */
  scopes: Scope[];
  /** The status a permitted caller gets. */
  okStatus?: number;
}

/**
 * The auth matrix of one read route: no credentials, a malformed key, an unknown key, a revoked key and an
 * expired key are 401; a key without the scope is 403; a key naming another workspace, or none, is 403; a key
 * with the scope (or `all`) naming its own workspace is let through.
 */
export async function authMatrix(t: Test, server: TestServer, owner: SignedUp, other: SignedUp, route: MatrixCase): Promise<void> {
  const ok = route.okStatus ?? 200;
  const naming = (workspaceId: string) => `${route.path}${route.path.includes('?') ? '&' : '?'}workspaceId=${workspaceId}`;
  const code = async (path: string, credential?: string) => {
    // A key names its own workspace unless the case says otherwise (docs/api.md, Authentication of every request).
    if (path === route.path && credential?.startsWith('gs_live_')) path = naming(owner.workspaceId);
    const response = await get(server, path, credential);
    return { status: response.status, code: response.body?.error?.code as string | undefined };
  };
  t.match(await code(route.path), { status: 401, code: 'unauthenticated' }, `${route.path}: no credentials`);
  t.match(await code(route.path, 'Bearer not-a-key'), { status: 401, code: 'unauthenticated' }, `${route.path}: malformed key`);
  t.match(await code(route.path, `gs_live_${'x'.repeat(64)}`), { status: 401, code: 'unauthenticated' }, `${route.path}: unknown key`);

  const revoked = await createKey(server, owner.cookie, owner.workspaceId, ['all'], { name: 'revoked' });
  const revoke = await server.json(`/v1/api-keys/${revoked.id}`, { method: 'DELETE', headers: { cookie: owner.cookie } });
  t.equal(revoke.status, 200);
  t.match(await code(route.path, revoked.key), { status: 401, code: 'unauthenticated' }, `${route.path}: revoked key`);

  const expiring = await createKey(server, owner.cookie, owner.workspaceId, ['all'], { name: 'expired' });
  await server.services.db.em().execute('update api_keys set expires_at = ? where id = ?', [new Date(server.services.clock.now() - 1000), expiring.id]);
  const [stored] = await server.services.db.em().execute<Array<{ key_hash: string }>>('select key_hash from api_keys where id = ?', [expiring.id]);
  await server.services.keyCache.invalidate(stored!.key_hash);
  t.match(await code(route.path, expiring.key), { status: 401, code: 'unauthenticated' }, `${route.path}: expired key`);

  const unscoped = await createKey(
    server,
    owner.cookie,
    owner.workspaceId,
    ['files.write', 'assets.read', 'usage.read', 'generations.write'].filter((s) => !route.scopes.includes(s as Scope)) as Scope[],
  );
  t.match(await code(route.path, unscoped.key), { status: 403, code: 'forbidden' }, `${route.path}: key without ${route.scopes.join('/')}`);

  for (const scopes of [route.scopes, ['all'] as Scope[]]) {
    const key = await createKey(server, owner.cookie, owner.workspaceId, scopes);
    t.equal((await code(route.path, key.key)).status, ok, `${route.path}: key with ${scopes.join(',')}`);
    t.match(await code(naming(other.workspaceId), key.key), { status: 403, code: 'forbidden' }, `${route.path}: key naming another workspace`);
    const none = await get(server, route.path, key.key);
    t.match({ status: none.status, code: none.body?.error?.code }, { status: 403, code: 'forbidden' }, `${route.path}: key naming no workspace`);
  }
}
