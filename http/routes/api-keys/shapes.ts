import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { SCOPES } from '../../route.ts';
import type { ApiKey } from '../../../persistence/stores/keys.ts';

/** Request and response shapes of API keys, and the one mapper from row to Out. */

const Time = (description: string) => Type.String({ format: 'date-time', description });

export const ScopeName = Type.Union(
  SCOPES.map((scope) => Type.Literal(scope)),
  { description: 'A key scope; `all` grants everything.' },
);
export const ScopeList = Type.Array(ScopeName, { minItems: 1, maxItems: SCOPES.length, uniqueItems: true });
export const KeyName = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S', description: '1 to 100 characters, not only spaces; trimmed.' });
export const KeyExpiry = Type.Union([Time('When the key stops working; must be in the future.'), Type.Null()], {
  description: 'null: the key does not expire.',
});

/** Per-key spending controls (domain/key-limits.ts); null: no such limit. */
const Budget = Type.Integer({ minimum: 0, maximum: 1_000_000_000, description: "Credits per period (the models' prices, however the job is paid)." });
const WalletCap = Type.Integer({ minimum: 0, maximum: 100_000_000, description: 'Wallet cents per period.' });
const Concurrency = Type.Integer({ minimum: 1, maximum: 10_000, description: 'Unfinished (queued or running) generations of the key at a time.' });
export const MAX_ALLOWED_MODELS = 50;
const ModelList = Type.Array(Type.String({ minLength: 1, maxLength: 100, description: 'A model id of GET /v1/models.' }), {
  minItems: 1,
  maxItems: MAX_ALLOWED_MODELS,
  uniqueItems: true,
  description: `1 to ${MAX_ALLOWED_MODELS} model ids the key may use.`,
});
export const BudgetPeriodName = Type.Union([Type.Literal('day'), Type.Literal('month')], {
  description: 'The UTC period of both the credit budget and the wallet cap; each resets at the start of the next day or month.',
});
const nullable = <T extends TSchema>(schema: T, description: string) => Type.Union([schema, Type.Null()], { description });

export const KeyLimitsPatch = Type.Object(
  {
    creditBudget: Type.Optional(nullable(Budget, "Credits the key's generations may take per period; null: no budget.")),
    walletSpendCapCents: Type.Optional(nullable(WalletCap, "Wallet cents the key's generations may take per period; null: no cap.")),
    period: Type.Optional(BudgetPeriodName),
    maxConcurrentGenerations: Type.Optional(nullable(Concurrency, "Unfinished generations of the key at a time; null: only the plan's limit.")),
    allowedModels: Type.Optional(nullable(ModelList, 'The only models the key may use; null: every model of the plan.')),
  },
  { additionalProperties: false, description: 'Spending controls; fields left out keep their value (on creation: none, period month), null clears a limit.' },
);
export type KeyLimitsPatch = Static<typeof KeyLimitsPatch>;

export const KeyLimitsOut = Type.Object(
  {
    creditBudget: Type.Union([Type.Integer(), Type.Null()]),
    walletSpendCapCents: Type.Union([Type.Integer(), Type.Null()]),
    period: BudgetPeriodName,
    maxConcurrentGenerations: Type.Union([Type.Integer(), Type.Null()]),
    allowedModels: Type.Union([Type.Array(Type.String()), Type.Null()]),
  },
  { additionalProperties: false, description: "The key's spending controls; null: no such limit." },
);

export const ApiKeyParams = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 64, description: 'API key id (key_…).' }) },
  { additionalProperties: false },
);

export const ApiKeyIn = Type.Object(
  {
    workspaceId: Type.String({ minLength: 1, maxLength: 64, description: 'The workspace the key belongs to; the caller must be its owner or an admin.' }),
    name: KeyName,
    scopes: ScopeList,
    expiresAt: Type.Optional(KeyExpiry),
    limits: Type.Optional(KeyLimitsPatch),
  },
  { additionalProperties: false },
);

export const ApiKeyPatch = Type.Object(
  {
    name: Type.Optional(KeyName),
    scopes: Type.Optional(ScopeList),
    expiresAt: Type.Optional(KeyExpiry),
    revoked: Type.Optional(Type.Boolean({ description: 'true revokes the key for good; a revoked key cannot be restored (409).' })),
    limits: Type.Optional(KeyLimitsPatch),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const ApiKeyOut = Type.Object(
  {
    id: Type.String({ description: 'key_…' }),
    workspaceId: Type.String(),
    name: Type.String(),
    prefix: Type.String({ description: 'The first 12 characters of the key (gs_live_ and four more), to tell keys apart.' }),
    scopes: Type.Array(ScopeName),
    expiresAt: Type.Union([Time('When the key stops working.'), Type.Null()]),
    revoked: Type.Boolean(),
    revokedAt: Type.Union([Time('When the key was revoked.'), Type.Null()]),
    lastUsedAt: Type.Union([Time('Last authenticated request, updated at most once a minute.'), Type.Null()]),
    limits: KeyLimitsOut,
    createdAt: Time('When the key was made.'),
  },
  { additionalProperties: false },
);
export type ApiKeyOut = Static<typeof ApiKeyOut>;

/** Only the answer to creation carries the plaintext; it is never shown again. */
export const ApiKeyCreatedOut = Type.Object(
  {
    ...ApiKeyOut.properties,
    key: Type.String({ pattern: '^gs_live_[A-Za-z0-9]{64}$', description: 'The plaintext key, shown this once; store it now.' }),
  },
  { additionalProperties: false },
);

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
    limits: {
      creditBudget: key.creditBudget,
      walletSpendCapCents: key.walletSpendCapCents,
      period: key.budgetPeriod,
      maxConcurrentGenerations: key.maxConcurrentGenerations,
      allowedModels: key.allowedModels,
    },
    createdAt: key.createdAt.toISOString(),
  };
}

function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

export const UsageQuery = Type.Object(
  {
    from: Type.Optional(Type.String({ format: 'date', description: 'First day (UTC, YYYY-MM-DD); default 29 days before `to`.' })),
    to: Type.Optional(Type.String({ format: 'date', description: 'Last day (UTC, YYYY-MM-DD); default today.' })),
  },
  { additionalProperties: false },
);

const LimitFigure = (description: string) =>
  Type.Object(
    {
      limit: Type.Union([Type.Integer(), Type.Null()], { description: 'null: no such limit.' }),
      spent: Type.Integer({ description }),
      remaining: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
      resetsAt: Type.Union([Time('When the period ends and spent starts again from zero.'), Type.Null()]),
    },
    { additionalProperties: false },
  );

export const UsageDay = Type.Object(
  {
    day: Type.String({ format: 'date' }),
    requests: Type.Integer({ minimum: 0, description: 'Authenticated requests made with the key that day.' }),
    generations: Type.Integer({ minimum: 0, description: 'Generations created with the key that day.' }),
  },
  { additionalProperties: false },
);

export const ApiKeyUsageOut = Type.Object(
  {
    keyId: Type.String(),
    from: Type.String({ format: 'date' }),
    to: Type.String({ format: 'date' }),
    totals: Type.Object({ requests: Type.Integer({ minimum: 0 }), generations: Type.Integer({ minimum: 0 }) }, { additionalProperties: false }),
    data: Type.Array(UsageDay, { description: 'Days with any use, newest first.' }),
    limits: Type.Object(
      {
        period: BudgetPeriodName,
        creditBudget: LimitFigure("Credits the key's generations took this period (reserved or captured; released ones come back)."),
        walletSpendCapCents: LimitFigure("Wallet cents the key's generations took this period."),
        concurrentGenerations: LimitFigure('Unfinished generations of the key now; resetsAt is null.'),
        allowedModels: Type.Union([Type.Array(Type.String()), Type.Null()]),
      },
      { additionalProperties: false, description: 'Each spending control as of now; spent is counted even without a limit.' },
    ),
  },
  { additionalProperties: false },
);
