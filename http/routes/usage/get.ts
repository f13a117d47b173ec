import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { WorkspaceIdField } from '../billing/shapes.ts';
import { timeBound } from '../generations/list.ts';

const Count = Type.Integer({ minimum: 0 });
const When = (description: string) => Type.String({ minLength: 10, maxLength: 40, description });

export const UsageOut = Type.Object({
  workspaceId: Type.String(),
  apiKeyId: Type.Union([Type.String(), Type.Null()], { description: 'Set when the usage is that of one API key (always, when called with a key).' }),
  from: Type.String({ format: 'date-time' }),
  to: Type.String({ format: 'date-time' }),
  generations: Type.Object({
    total: Count, succeeded: Count, failed: Count, cancelled: Count, expired: Count, unfinished: Count,
  }, { additionalProperties: false, description: 'Generations created in [from, to), by status.' }),
  credits: Count,
  creditsFromBalance: Count,
  costCents: Count,
  outputBytes: Count,
}, { additionalProperties: false, description: 'Usage of the generations created in [from, to): credits and wallet cents as captured in the ledger.' });

export const getUsage = defineRoute({
  method: 'GET',
  path: '/v1/usage',
  operationId: 'getUsage',
  summary: 'Usage summary by date range: generations, credits charged, wallet cost, output bytes; attributed to the key when called with one',
  tags: ['usage'],
  access: { scopes: ['usage.read'] },
  query: Type.Object({
    workspaceId: WorkspaceIdField,
    from: Type.Optional(When('Generations created at or after (ISO 8601 date-time with a zone, or a UTC date). Default: the start of the current UTC month.')),
    to: Type.Optional(When('Created before (a date-only value includes that whole day). Default: now.')),
    apiKeyId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Signed in: the usage of one key of the workspace.' })),
  }, { additionalProperties: false }),
  responses: { 200: UsageOut },
  handler: async ({ auth, query, services }) => {
    const em = services.db.em();
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

    const where = ['g.workspace_id = ?', 'g.created_at >= ?::timestamptz', 'g.created_at < ?::timestamptz'];
    const values: unknown[] = [workspace.id, from, to];
    if (apiKeyId !== null) {
      where.push('g.api_key_id = ?');
      values.push(apiKeyId);
    }
    const scope = where.join(' and ');
    const [counts] = await em.execute<Array<Record<string, string | number>>>(
      `select count(*) as total,
              count(*) filter (where g.status = 'succeeded') as succeeded, count(*) filter (where g.status = 'failed') as failed,
              count(*) filter (where g.status = 'cancelled') as cancelled, count(*) filter (where g.status = 'expired') as expired,
              count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')) as unfinished
         from generations g where ${scope}`, values);
    // Credits and cost come from the ledger's capture entries, so usage adds up with the balances.
    const [money] = await em.execute<Array<Record<string, string | number>>>(
      `select coalesce(sum(g.credits), 0) as credits, coalesce(sum(-l.reserved_credits), 0) as from_balance, coalesce(sum(-l.reserved_wallet_cents), 0) as cost
         from credit_ledger l join generations g on g.id = l.generation_id
        where l.workspace_id = ? and l.kind = 'capture' and ${scope}`, [workspace.id, ...values]);
    const [bytes] = await em.execute<Array<{ bytes: string | number }>>(
      `select coalesce(sum(a.bytes), 0) as bytes from assets a join generations g on g.id = a.source_generation_id
        where a.workspace_id = ? and ${scope}`, [workspace.id, ...values]);
    const n = (value: unknown) => Number(value ?? 0);
    return {
      body: {
        workspaceId: workspace.id,
        apiKeyId,
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
        generations: {
          total: n(counts?.total), succeeded: n(counts?.succeeded), failed: n(counts?.failed),
          cancelled: n(counts?.cancelled), expired: n(counts?.expired), unfinished: n(counts?.unfinished),
        },
        credits: n(money?.credits),
        creditsFromBalance: n(money?.from_balance),
        costCents: n(money?.cost),
        outputBytes: n(bytes?.bytes),
      },
    };
  },
});
