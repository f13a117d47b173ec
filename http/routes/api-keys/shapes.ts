import { Type, type Static } from '@sinclair/typebox';
import { SCOPES } from '../../route.ts';
import type { ApiKey } from '../../../persistence/entities/api-key.ts';

/** Request and response shapes of API keys, and the one mapper from row to Out. */

const Time = (description: string) => Type.String({ format: 'date-time', description });

export const ScopeName = Type.Union(SCOPES.map((scope) => Type.Literal(scope)), { description: 'A key scope (SPEC.md section 5); `all` grants everything.' });
export const ScopeList = Type.Array(ScopeName, { minItems: 1, maxItems: SCOPES.length, uniqueItems: true });
export const KeyName = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S', description: '1 to 100 characters, not only spaces; trimmed.' });
export const KeyExpiry = Type.Union([Time('When the key stops working; must be in the future.'), Type.Null()], { description: 'null: the key does not expire.' });

export const ApiKeyParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'API key id (key_…).' }) }, { additionalProperties: false });

export const ApiKeyIn = Type.Object({
  workspaceId: Type.String({ minLength: 1, maxLength: 64, description: 'The workspace the key belongs to; the caller must be its owner or an admin.' }),
  name: KeyName,
  scopes: ScopeList,
  expiresAt: Type.Optional(KeyExpiry),
}, { additionalProperties: false });

export const ApiKeyPatch = Type.Object({
  name: Type.Optional(KeyName),
  scopes: Type.Optional(ScopeList),
  expiresAt: Type.Optional(KeyExpiry),
  revoked: Type.Optional(Type.Boolean({ description: 'true revokes the key for good; a revoked key cannot be restored (409).' })),
}, { additionalProperties: false, minProperties: 1 });

export const ApiKeyOut = Type.Object({
  id: Type.String({ description: 'key_…' }),
  workspaceId: Type.String(),
  name: Type.String(),
  prefix: Type.String({ description: 'The first 12 characters of the key (gs_live_ and four more), to tell keys apart.' }),
  scopes: Type.Array(ScopeName),
  expiresAt: Type.Union([Time('When the key stops working.'), Type.Null()]),
  revoked: Type.Boolean(),
  revokedAt: Type.Union([Time('When the key was revoked.'), Type.Null()]),
  lastUsedAt: Type.Union([Time('Last authenticated request, updated at most once a minute.'), Type.Null()]),
  createdAt: Time('When the key was made.'),
}, { additionalProperties: false });
export type ApiKeyOut = Static<typeof ApiKeyOut>;

/** Only the answer to creation carries the plaintext; it is never shown again. */
export const ApiKeyCreatedOut = Type.Object({
  ...ApiKeyOut.properties,
  key: Type.String({ pattern: '^gs_live_[A-Za-z0-9]{64}$', description: 'The plaintext key, shown this once; store it now.' }),
}, { additionalProperties: false });

export function toApiKeyOut(key: ApiKey): ApiKeyOut {
  return {
    id: key.id,
    workspaceId: key.workspaceId,
    name: key.name,
    prefix: key.prefix,
    scopes: key.scopes as ApiKeyOut['scopes'],
    expiresAt: iso(key.expiresAt),
    revoked: key.revokedAt !== null,
    revokedAt: iso(key.revokedAt),
    lastUsedAt: iso(key.lastUsedAt),
    createdAt: key.createdAt.toISOString(),
  };
}

function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

export const UsageQuery = Type.Object({
  from: Type.Optional(Type.String({ format: 'date', description: 'First day (UTC, YYYY-MM-DD); default 29 days before `to`.' })),
  to: Type.Optional(Type.String({ format: 'date', description: 'Last day (UTC, YYYY-MM-DD); default today.' })),
}, { additionalProperties: false });

export const UsageDay = Type.Object({
  day: Type.String({ format: 'date' }),
  requests: Type.Integer({ minimum: 0, description: 'Authenticated requests made with the key that day.' }),
  generations: Type.Integer({ minimum: 0, description: 'Generations created with the key that day.' }),
}, { additionalProperties: false });

export const ApiKeyUsageOut = Type.Object({
  keyId: Type.String(),
  from: Type.String({ format: 'date' }),
  to: Type.String({ format: 'date' }),
  totals: Type.Object({ requests: Type.Integer({ minimum: 0 }), generations: Type.Integer({ minimum: 0 }) }, { additionalProperties: false }),
  data: Type.Array(UsageDay, { description: 'Days with any use, newest first.' }),
}, { additionalProperties: false });
