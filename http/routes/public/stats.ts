import { Type, type Static } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import type { Services } from '../../services.ts';
import { serviceCounts } from '../../../persistence/stores/stats.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

/** Counts are read from the database at most once per this many milliseconds per node. */
export const STATS_CACHE_MS = 10_000;

export const PublicStatsOut = Type.Object(
  {
    generations: Type.Object(
      {
        total: Type.Integer({ minimum: 0, description: 'Generations ever accepted.' }),
        succeeded: Type.Integer({ minimum: 0 }),
      },
      { additionalProperties: false },
    ),
    workspaces: Type.Integer({ minimum: 0 }),
    modelsOffered: Type.Integer({ minimum: 0, description: 'Models this service runs.' }),
    modes: Type.Integer({ minimum: 0, description: 'Generation modes those models cover.' }),
    asOf: Type.String({ format: 'date-time', description: 'When the counts were read; they are cached for up to 10 seconds.' }),
  },
  { additionalProperties: false },
);
type PublicStats = Static<typeof PublicStatsOut>;

interface Cached {
  at: number;
  stats?: PublicStats;
  /** A read in flight: concurrent requests share it instead of each counting. */
  pending?: Promise<PublicStats>;
}

const cache = new WeakMap<Services, Cached>();

async function countAll(services: Services): Promise<PublicStats> {
  const counts = await serviceCounts(openUnit(services.db));
  const offered = services.catalog.offered();
  return {
    generations: { total: counts.generations, succeeded: counts.succeeded },
    workspaces: counts.workspaces,
    modelsOffered: offered.length,
    modes: new Set(offered.map((model) => model.mode)).size,
    asOf: new Date(services.clock.now()).toISOString(),
  };
}

async function publicStats(services: Services): Promise<PublicStats> {
  const now = services.clock.now();
  let entry = cache.get(services);
  if (entry?.stats && now - entry.at < STATS_CACHE_MS) return entry.stats;
  if (entry?.pending) return entry.pending;
  entry ??= { at: 0 };
  cache.set(services, entry);
  const current = entry;
  current.pending = countAll(services)
    .then((stats) => {
      current.stats = stats;
      current.at = now;
      return stats;
    })
    .finally(() => {
      current.pending = undefined;
    });
  return current.pending;
}

export const getPublicStats = defineRoute({
  method: 'GET',
  path: '/v1/stats/public',
  operationId: 'getPublicStats',
  summary: 'Platform statistics read from the database: generations (total, succeeded), workspaces, models (no authentication; cached 10 s)',
  description:
    'Platform statistics read from the database: generations (total and succeeded), workspaces and models. Needs no credentials; cached for 10 seconds.',
  tags: ['public'],
  access: 'public',
  responses: { 200: PublicStatsOut },
  handler: async ({ services }) => ({
    headers: { 'Cache-Control': `public, max-age=${STATS_CACHE_MS / 1000}` },
    body: await publicStats(services),
  }),
});
