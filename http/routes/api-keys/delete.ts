import { defineRoute } from '../../route.ts';
import { revokeKey } from '../../../persistence/stores/keys.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openKey } from './access.ts';
import { ApiKeyOut, ApiKeyParams, toApiKeyOut } from './shapes.ts';

export const deleteApiKey = defineRoute({
  method: 'DELETE',
  path: '/v1/api-keys/:id',
  operationId: 'deleteApiKey',
  summary: 'Revoke a key for good (its record and usage stay, marked revoked); idempotent (dashboard only)',
  description:
    'Revokes a key for good: requests made with it are 401 from then on, while its record and usage history stay, marked revoked. Revoking a revoked key answers the same again.',
  tags: ['api-keys'],
  access: 'dashboard',
  params: ApiKeyParams,
  responses: { 200: ApiKeyOut },
  handler: async ({ auth, params, query, services }) => {
    const unit = openUnit(services.db);
    const key = await openKey(unit, auth, params.id, (query as { workspaceId?: string }).workspaceId);
    if (key.revokedAt === null) {
      const now = new Date(services.clock.now());
      await revokeKey(unit, key.id, now);
      key.revokedAt = now;
      key.updatedAt = now;
    }
    await services.keyCache.invalidate(key.keyHash);
    return { body: toApiKeyOut(key) };
  },
});
