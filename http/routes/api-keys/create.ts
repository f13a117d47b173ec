import { defineRoute } from '../../route.ts';
import { newApiKey, API_KEY_SHOWN_PREFIX_LENGTH, sha256Hex } from '../../auth/tokens.ts';
import { newId } from '../../../persistence/ids.ts';
import { insertKey, type ApiKey } from '../../../persistence/stores/keys.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { checkAllowedModels, checkExpiry, openKeyWorkspace } from './access.ts';
import { ApiKeyCreatedOut, ApiKeyIn, toApiKeyOut } from './shapes.ts';

export const createApiKey = defineRoute({
  method: 'POST',
  path: '/v1/api-keys',
  operationId: 'createApiKey',
  summary: 'Create an API key for a workspace; the plaintext key is in this answer only (dashboard only; owners and admins)',
  description:
    'Creates an API key of one workspace with the given scopes and an optional expiry. The plaintext key is in this answer only and cannot be shown again. Only owners and admins of the workspace may create keys; for a workspace the caller is not a member of the answer is 404.',
  tags: ['api-keys'],
  access: 'dashboard',
  errors: ['not_found'],
  body: ApiKeyIn,
  responses: { 201: ApiKeyCreatedOut },
  handler: async ({ auth, body, services }) => {
    const now = services.clock.now();
    const expiresAt = checkExpiry(body.expiresAt, now) ?? null;
    checkAllowedModels(services.catalog, body.limits);
    const limits = body.limits ?? {};
    const unit = openUnit(services.db);
    await openKeyWorkspace(unit, auth, body.workspaceId);
    const plaintext = newApiKey();
    const keyHash = sha256Hex(plaintext);
    const at = new Date(now);
    const key: ApiKey = {
      id: newId('key', now),
      workspaceId: body.workspaceId,
      createdBy: auth?.kind === 'session' ? auth.userId : null,
      name: body.name.trim(),
      prefix: plaintext.slice(0, API_KEY_SHOWN_PREFIX_LENGTH),
      keyHash,
      scopes: body.scopes,
      expiresAt,
      revokedAt: null,
      lastUsedAt: null,
      // A new key has spent nothing: its limits go straight to its row, and the workspace actor reads them on its first create.
      creditBudget: limits.creditBudget ?? null,
      walletSpendCapCents: limits.walletSpendCapCents ?? null,
      budgetPeriod: limits.period ?? 'month',
      maxConcurrentGenerations: limits.maxConcurrentGenerations ?? null,
      allowedModels: limits.allowedModels ?? null,
      createdAt: at,
      updatedAt: at,
    };
    await insertKey(unit, key);
    // Nobody can have presented this key yet; dropping its hash clears any "unknown key" entry all the same.
    services.keyCache.drop(keyHash);
    return { status: 201, headers: { 'Cache-Control': 'no-store' }, body: { ...toApiKeyOut(key), key: plaintext } };
  },
});
