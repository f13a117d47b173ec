import { EntitySchema } from '@mikro-orm/core';

/** An API key of one workspace; only the SHA-256 hex of the plaintext is stored. */
export interface ApiKey {
  id: string;
  workspaceId: string;
  createdBy: string | null;
  name: string;
  /** The first characters of the plaintext (`gs_live_` and four more), shown in lists. */
  prefix: string;
  keyHash: string;
  /** Scope names of http/route.ts SCOPES. */
  scopes: string[];
  expiresAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  /** Spending controls (migration 0014); null: no such limit. Enforced by the workspace actor. */
  creditBudget: number | null;
  walletSpendCapCents: number | null;
  budgetPeriod: 'day' | 'month';
  maxConcurrentGenerations: number | null;
  allowedModels: string[] | null;
  createdAt: Date;
  updatedAt: Date;
}

export const ApiKeyEntity = new EntitySchema<ApiKey>({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    createdBy: { type: 'string', fieldName: 'created_by', nullable: true },
    name: { type: 'string' },
    prefix: { type: 'string' },
    keyHash: { type: 'string', fieldName: 'key_hash' },
    scopes: { type: 'json', columnType: 'jsonb' },
    expiresAt: { type: 'Date', fieldName: 'expires_at', nullable: true },
    revokedAt: { type: 'Date', fieldName: 'revoked_at', nullable: true },
    lastUsedAt: { type: 'Date', fieldName: 'last_used_at', nullable: true },
    creditBudget: { type: 'integer', fieldName: 'credit_budget', nullable: true },
    walletSpendCapCents: { type: 'integer', fieldName: 'wallet_spend_cap_cents', nullable: true },
    budgetPeriod: { type: 'string', fieldName: 'budget_period' },
    maxConcurrentGenerations: { type: 'integer', fieldName: 'max_concurrent_generations', nullable: true },
    allowedModels: { type: 'json', columnType: 'jsonb', fieldName: 'allowed_models', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
  },
});
