import { signUp } from '../lib/accounts.ts';
import { scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario, ScenarioOutcome } from '../lib/types.ts';

/**
 * The small history: RECENT jobs over the last 7 days. The large one adds OLDER jobs (BENCH_SERIES_HISTORY) over
 * the 358 days before them, so a year holds 1,000,000 and the week read answers the same points either way.
 */
const RECENT = 10_000;
const OLDER = Number(process.env.BENCH_SERIES_HISTORY ?? 990_000);
const SMALL = RECENT;
const LARGE = RECENT + OLDER;
const DAYS = 365;
const CONNECTIONS = 16;
const SEQUENTIAL = 40;
/** Within this ratio of req/s, the read is taken as not growing with the history. */
const TARGET = 0.8;

/**
 * GET /v1/usage/series (docs/money.md, Usage over time) over a history of 10,000 jobs and then of 1,000,000,
 * both spread over the last year on 4 models, 3 API keys and 2 projects: the week by hour grouped by model
 * reads the same rows whatever the history (the primary key's prefix: workspace, grain, bucket), and a year
 * by day costs about what a week by hour does. The history is the usage_series rows those jobs make (the
 * sums of migration 0022's backfill, computed in SQL over generate_series), since the read touches nothing
 * else; each answer's total is checked against the jobs in its range.
 */
async function run(ctx: BenchContext): Promise<ScenarioOutcome> {
  const db = await scratchDatabase();
  let server: ExtraServer | undefined;
  try {
    server = await ctx.startService('service (PostgreSQL)', { DATABASE_URL: db.url, RATE_LIMIT_FREE: '1000000', LOCAL_PROVIDER_LATENCY_MS: '0' });
    const account = await signUp(server.url);
    // Signed in: the workspace's whole usage (a key would read its own only).
    const headers = { cookie: account.cookie };
    const now = Date.now();
    const hour = Math.floor(now / 3_600_000) * 3_600_000;
    const day = Math.floor(now / 86_400_000) * 86_400_000;
    const week = `/v1/usage/series?workspaceId=${account.workspaceId}&granularity=hour&groupBy=model&from=${new Date(hour - 7 * 86_400_000).toISOString()}&to=${new Date(hour).toISOString()}`;
    const year = `/v1/usage/series?workspaceId=${account.workspaceId}&granularity=day&groupBy=model&from=${new Date(day - DAYS * 86_400_000).toISOString()}&to=${new Date(day).toISOString()}`;
    /** One client's p50 over SEQUENTIAL requests in a row (after 5 discarded): the latency without queueing behind others. */
    const sequential = async (path: string): Promise<number> => {
      const times: number[] = [];
      for (let i = 0; i < SEQUENTIAL + 5; i++) {
        const started = performance.now();
        const res = await fetch(`${server!.url}${path}`, { headers });
        await res.arrayBuffer();
        if (i >= 5) times.push(performance.now() - started);
      }
      times.sort((a, b) => a - b);
      return Math.round(times[Math.floor(times.length / 2)]! * 10) / 10;
    };
    const measure = async (path: string, title: string, expected: number): Promise<LoadSummary> => {
      const res = await fetch(`${server!.url}${path}`, { headers });
      const body = (await res.json()) as { totals: Array<{ generations: { total: number } }> };
      const total = body.totals?.reduce((n, t) => n + t.generations.total, 0);
      if (res.status !== 200 || total !== expected) throw new Error(`GET ${path}: ${res.status}, total ${total} where ${expected} jobs are in the range`);
      return ctx.load({ server: server!, path, headers, connections: CONNECTIONS, title });
    };

    const seeded = async (older: number) => {
      await history(db, account.workspaceId, older, now);
      const inRange = async (from: number, to: number) => {
        const { rows } = await db.query<{ n: string }>(
          `select coalesce(sum(total), 0) as n from usage_series where workspace_id = $1 and grain = 'hour' and bucket >= $2 and bucket < $3`,
          [account.workspaceId, new Date(from), new Date(to)],
        );
        return Number(rows[0]!.n);
      };
      return { week: await inRange(hour - 7 * 86_400_000, hour), year: await inRange(day - DAYS * 86_400_000, day) };
    };
    const small = await seeded(0);
    const smallWeek = await measure(week, `a week by hour, ${SMALL} jobs of history`, small.week);
    const smallWeekOne = await sequential(week);
    const large = await seeded(OLDER);
    const largeWeek = await measure(week, `a week by hour, ${LARGE} jobs of history`, large.week);
    const largeYear = await measure(year, `a year by day, ${LARGE} jobs of history`, large.year);
    const largeWeekOne = await sequential(week);
    const largeYearOne = await sequential(year);
    const { rows } = await db.query<{ grain: string; n: string }>(
      'select grain, count(*) as n from usage_series where workspace_id = $1 group by 1 order by 1',
      [account.workspaceId],
    );
    const ratio = Math.round((largeWeek.reqPerSec / smallWeek.reqPerSec) * 100) / 100;
    return {
      result: largeWeek,
      baseline: smallWeek,
      ratio,
      target: TARGET,
      notes: [
        `one client, ${SEQUENTIAL} requests in a row, p50: a week by hour ${smallWeekOne} ms with ${SMALL} jobs of history, ${largeWeekOne} ms with ${LARGE}; a year by day ${largeYearOne} ms with ${LARGE}`,
        `GET /v1/usage/series, a week by hour grouped by model: ${SMALL} jobs of history vs ${LARGE}: ${Math.round(smallWeek.reqPerSec)} vs ${Math.round(largeWeek.reqPerSec)} req/s (ratio ${ratio}, target ≥ ${TARGET}); p50 ${smallWeek.latencyMs.p50} vs ${largeWeek.latencyMs.p50} ms, p99 ${smallWeek.latencyMs.p99} vs ${largeWeek.latencyMs.p99} ms; ${CONNECTIONS} clients`,
        `a year by day grouped by model, ${LARGE} jobs of history: ${Math.round(largeYear.reqPerSec)} req/s, p50 ${largeYear.latencyMs.p50} ms, p99 ${largeYear.latencyMs.p99} ms (a week by hour: p50 ${largeWeek.latencyMs.p50} ms)`,
        `the history: the usage_series rows of the jobs (4 models, 3 keys, 2 projects): ${RECENT} over the last 7 days, and ${OLDER} over the ${DAYS - 7} days before them in the large one; ${rows.map((r) => `${r.n} ${r.grain} rows`).join(', ')}; each answer's total checked against the rows`,
      ],
    };
  } finally {
    await server?.stop();
    await db.drop();
  }
}

/**
 * Replaces the workspace's series with the rows RECENT jobs spread evenly over the 7 days before `now` make,
 * and `older` jobs over the DAYS - 7 days before those.
 */
async function history(db: ScratchDatabase, workspaceId: string, older: number, now: number): Promise<void> {
  await db.query('delete from usage_series where workspace_id = $1', [workspaceId]);
  const spans: Array<[number, number, number]> = [[RECENT, now, 7]];
  if (older > 0) spans.push([older, now - 7 * 86_400_000, DAYS - 7]);
  for (const [jobs, end, days] of spans)
    for (const grain of ['hour', 'day']) {
      await db.query(
        `insert into usage_series (workspace_id, grain, bucket, api_key_id, model_id, mode, project, total, succeeded, credits, credits_from_balance, tokens_in, tokens_out)
       select $1, $2, date_trunc($2, j.at at time zone 'UTC') at time zone 'UTC',
              'key_bench' || (j.n % 3), 'local/model-' || (j.n % 4), 'text_to_text',
              case j.n % 2 when 0 then '' else 'project' end, count(*), count(*), count(*), count(*), sum(40), sum(200)
         from (select n, to_timestamp($3::float8 / 1000) - ((n - 0.5) / $4::int * $5::int * 86400) * interval '1 second' as at
                 from generate_series(1, $4::int) n) j
        group by 1, 2, 3, 4, 5, 6, 7
       on conflict (workspace_id, grain, bucket, api_key_id, model_id, mode, project) do update set total = usage_series.total + excluded.total,
         succeeded = usage_series.succeeded + excluded.succeeded, credits = usage_series.credits + excluded.credits,
         credits_from_balance = usage_series.credits_from_balance + excluded.credits_from_balance,
         tokens_in = usage_series.tokens_in + excluded.tokens_in, tokens_out = usage_series.tokens_out + excluded.tokens_out`,
        [workspaceId, grain, end, jobs, days],
      );
    }
  await db.query('analyze usage_series');
}

export const usageSeries: Scenario = {
  name: 'usage-series',
  description: 'GET /v1/usage/series, a week by hour over 10,000 jobs of history vs 1,000,000, and a year by day (PostgreSQL)',
  budgetS: 900,
  run,
};
