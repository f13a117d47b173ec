import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { ApiKeyEntity, type ApiKey } from '../../../persistence/entities/api-key.ts';
import { checkExpiry, openKey } from './access.ts';
import { ApiKeyOut, ApiKeyParams, ApiKeyPatch, toApiKeyOut } from './shapes.ts';

export const updateApiKey = defineRoute({
  method: 'PATCH',
  path: '/v1/api-keys/:id',
  operationId: 'updateApiKey',
  summary: 'Change a key\'s name, scopes or expiry, or revoke it (revoked: true); takes effect on the next request (dashboard only)',
  description: 'Changes a key\'s name, scopes or expiry, or revokes it with revoked: true; every node sees the change on the key\'s next request. A revoked key cannot be restored (409).',
  tags: ['api-keys'],
  access: 'dashboard',
  errors: ['conflict'],
  params: ApiKeyParams,
  body: ApiKeyPatch,
  responses: { 200: ApiKeyOut },
  handler: async ({ auth, params, body, services }) => {
    const now = services.clock.now();
    const expiresAt = checkExpiry(body.expiresAt, now);
    const em = services.db.em();
    const key = await openKey(em, auth, params.id);
    if (body.revoked === false && key.revokedAt !== null) throw new ApiError('conflict', 'A revoked key cannot be restored; create a new key.');
    const changes: Partial<ApiKey> = { updatedAt: new Date(now) };
    if (body.name !== undefined) changes.name = body.name.trim();
    if (body.scopes !== undefined) changes.scopes = body.scopes;
    if (expiresAt !== undefined) changes.expiresAt = expiresAt;
    if (body.revoked === true && key.revokedAt === null) changes.revokedAt = new Date(now);
    await em.nativeUpdate(ApiKeyEntity, { id: key.id }, changes);
    await services.keyCache.invalidate(key.keyHash);
    return { body: toApiKeyOut({ ...key, ...changes }) };
  },
});
