import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { WorkspaceIdField } from '../billing/shapes.ts';
import { timeBound } from '../generations/list.ts';
import { readUsage } from '../../../persistence/usage-rollups.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

const Count = Type.Integer({ minimum: 0 });
const When = (description: string) => Type.String({ minLength: 10, maxLength: 40, description });

export const UsageOut = Type.Object(
  {
    workspaceId: Type.String(),
    apiKeyId: Type.Union([Type.String(), Type.Null()], { description: 'Set when the usage is that of one API key (always, when called with a key).' }),
    from: Type.String({ format: 'date-time' }),
    to: Type.String({ format: 'date-time' }),
    generations: Type.Object(
      {
        total: Count,
        succeeded: Count,
        failed: Count,
        cancelled: Count,
        expired: Count,
        unfinished: Count,
      },
      { additionalProperties: false, description: 'Generations created in [from, to), by status.' },
    ),
    credits: Count,
    creditsFromBalance: Count,
    costCents: Count,
    outputBytes: Count,
  },
  { additionalProperties: false, description: 'Usage of the generations created in [from, to): credits and wallet cents as captured in the ledger.' },
);

export const getUsage = defineRoute({
  method: 'GET',
  path: '/v1/usage',
  operationId: 'getUsage',
  summary: 'Usage summary by date range: generations, credits charged, wallet cost, output bytes; attributed to the key when called with one',
  description:
    "A usage summary of a workspace over a date range (by default this month): generations, credits charged, wallet cost and output bytes. Called with an API key, it covers that key's own usage only (naming another key is 403).",
  tags: ['usage'],
  access: { scopes: ['usage.read'] },
  errors: ['not_found'],
  query: Type.Object(
    {
      workspaceId: WorkspaceIdField,
      from: Type.Optional(
        When('Generations created at or after (ISO 8601 date-time with a zone, or a UTC date). Default: the start of the current UTC month.'),
      ),
      to: Type.Optional(When('Created before (a date-only value includes that whole day). Default: now.')),
      apiKeyId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Signed in: the usage of one key of the workspace.' })),
    },
    { additionalProperties: false },
  ),
  responses: { 200: UsageOut },
  handler: async ({ auth, query, services }) => {
    const em = openUnit(services.db);
    const workspace = await moneyWorkspace(em, auth, query.workspaceId);
    let apiKeyId: string | null = query.apiKeyId ?? null;
    if (auth?.kind === 'key') {
      if (apiKeyId !== null && apiKeyId !== auth.keyId) throw new ApiError('forbidden', 'An API key reads its own usage only.');
      apiKeyId = auth.keyId;
    }
    const now = services.clock.now();
    const monthStart = `${new Date(now).toISOString().slice(0, 7)}-01T00:00:00.000Z`;
    const from = query.from === undefined ? monthStart : timeBound('from', query.from);
    const to = query.to === undefined ? new Date(now + 1).toISOString() : timeBound('to', query.to);
    if (Date.parse(from) >= Date.parse(to)) throw new ApiError('validation_error', 'query.from: must be before query.to');

    // Whole UTC days come from the usage rollups, the partial days at the edges from their rows: the
    // cost is that of a day's generations at most, whatever the history (persistence/usage-rollups.ts).
    const usage = await readUsage(em, workspace.id, apiKeyId, from, to);
    return {
      body: {
        workspaceId: workspace.id,
        apiKeyId,
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
        generations: {
          total: usage.total,
          succeeded: usage.succeeded,
          failed: usage.failed,
          cancelled: usage.cancelled,
          expired: usage.expired,
          unfinished: usage.unfinished,
        },
        credits: usage.credits,
        creditsFromBalance: usage.creditsFromBalance,
        costCents: usage.costCents,
        outputBytes: usage.outputBytes,
      },
    };
  },
});
