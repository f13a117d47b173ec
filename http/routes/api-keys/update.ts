import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { workspaceOfRow } from '../../owner.ts';
import { updateKeyRow, type ApiKey } from '../../../persistence/stores/keys.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { checkAllowedModels, checkExpiry, openKey } from './access.ts';
import { ApiKeyOut, ApiKeyParams, ApiKeyPatch, toApiKeyOut } from './shapes.ts';

export const updateApiKey = defineRoute({
  method: 'PATCH',
  path: '/v1/api-keys/:id',
  operationId: 'updateApiKey',
  summary:
    "Change a key's name, scopes, expiry or spending controls (null clears a limit), or revoke it (revoked: true); takes effect on the next request (dashboard only)",
  description:
    "Changes a key's name, scopes, expiry or spending controls (credit budget, wallet cap, concurrency, model allowlist; null clears one), or revokes it with revoked: true; every node sees the change on the key's next request. A revoked key cannot be restored (409).",
  tags: ['api-keys'],
  access: 'dashboard',
  errors: ['conflict'],
  // The limits change through the key's workspace actor, which decides every create against them.
  owner: workspaceOfRow('api_keys'),
  params: ApiKeyParams,
  body: ApiKeyPatch,
  responses: { 200: ApiKeyOut },
  handler: async ({ auth, params, query, body, services }) => {
    const now = services.clock.now();
    const expiresAt = checkExpiry(body.expiresAt, now);
    checkAllowedModels(services.catalog, body.limits);
    const unit = openUnit(services.db);
    const key = await openKey(unit, auth, params.id, (query as { workspaceId?: string }).workspaceId);
    if (body.revoked === false && key.revokedAt !== null) throw new ApiError('conflict', 'A revoked key cannot be restored; create a new key.');
    const changes: Partial<ApiKey> = { updatedAt: new Date(now) };
    if (body.limits !== undefined && Object.keys(body.limits).length > 0) {
      const reply = await services.actors.ask('ws', key.workspaceId, { type: 'key_limits', keyId: key.id, patch: body.limits });
      if (!reply.found) throw new ApiError('not_found', `No API key ${key.id}.`);
      const { limits } = reply;
      Object.assign(changes, {
        creditBudget: limits.creditBudget,
        walletSpendCapCents: limits.walletSpendCapCents,
        budgetPeriod: limits.period,
        maxConcurrentGenerations: limits.maxConcurrentGenerations,
        allowedModels: limits.allowedModels,
      } satisfies Partial<ApiKey>);
    }
    const rowChanges: Partial<ApiKey> = { updatedAt: changes.updatedAt };
    if (body.name !== undefined) rowChanges.name = body.name.trim();
    if (body.scopes !== undefined) rowChanges.scopes = body.scopes;
    if (expiresAt !== undefined) rowChanges.expiresAt = expiresAt;
    if (body.revoked === true && key.revokedAt === null) rowChanges.revokedAt = new Date(now);
    await updateKeyRow(unit, key.id, rowChanges);
    await services.keyCache.invalidate(key.keyHash);
    return { body: toApiKeyOut({ ...key, ...changes, ...rowChanges }) };
  },
});
