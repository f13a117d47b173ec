import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { utcDay } from '../../auth/key-usage.ts';
import { openKey } from './access.ts';
import { workspaceOfRow } from '../../owner.ts';
import { keyGenerationsByDay, keyRequestsByDay } from '../../../persistence/stores/keys.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { ApiKeyParams, ApiKeyUsageOut, UsageQuery } from './shapes.ts';

const DAY_MS = 86_400_000;
const MAX_DAYS = 366;

export const getApiKeyUsage = defineRoute({
  method: 'GET',
  path: '/v1/api-keys/:id/usage',
  operationId: 'getApiKeyUsage',
  summary:
    'Requests and generations attributed to a key, by UTC day (default: the last 30 days; at most 366), and each of its spending controls now: limit, spent, remaining, resetsAt (dashboard only)',
  description:
    "Requests made with a key and generations attributed to it, per UTC day between from and to (by default the last 30 days, at most 366), with each of the key's spending controls as it stands: limit, spent, remaining and when it resets.",
  tags: ['api-keys'],
  access: 'dashboard',
  // The spent figures are the key's workspace actor's, which counts every create as it decides it.
  owner: workspaceOfRow('api_keys'),
  params: ApiKeyParams,
  query: UsageQuery,
  responses: { 200: ApiKeyUsageOut },
  handler: async ({ auth, params, query, services }) => {
    const unit = openUnit(services.db);
    const key = await openKey(unit, auth, params.id, (query as { workspaceId?: string }).workspaceId);
    const to = query.to ?? utcDay(services.clock.now());
    const from = query.from ?? utcDay(Date.parse(`${to}T00:00:00Z`) - 29 * DAY_MS);
    const days = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / DAY_MS + 1;
    if (days < 1) throw new ApiError('validation_error', 'query.from: must not be after query.to');
    if (days > MAX_DAYS) throw new ApiError('validation_error', `query: at most ${MAX_DAYS} days at once`);
    // Counts of this node not yet written would be missing; write them first.
    await services.keyUsage.flush();
    const requests = await keyRequestsByDay(unit, key.id, from, to);
    // Generations are counted in the usage rollups, kept with the rows in the same transactions, so the
    // figure cannot drift from GET /v1/generations, and reading it costs a row per day (persistence/usage-rollups.ts).
    const generations = await keyGenerationsByDay(unit, key.workspaceId, key.id, from, to);
    const byDay = new Map<string, { day: string; requests: number; generations: number }>();
    const slot = (day: string) => byDay.get(day) ?? byDay.set(day, { day, requests: 0, generations: 0 }).get(day)!;
    for (const row of requests) slot(row.day).requests += Number(row.n);
    for (const row of generations) slot(row.day).generations += Number(row.n);
    const data = [...byDay.values()].sort((x, y) => (x.day < y.day ? 1 : -1));
    const totals = data.reduce((sum, d) => ({ requests: sum.requests + d.requests, generations: sum.generations + d.generations }), {
      requests: 0,
      generations: 0,
    });
    const limits = await services.actors.ask('ws', key.workspaceId, { type: 'key_usage', keyId: key.id });
    if (!limits.found) throw new ApiError('not_found', `No API key ${key.id}.`);
    return { body: { keyId: key.id, from, to, totals, data, limits: limits.usage } };
  },
});
