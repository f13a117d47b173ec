import { createKey, signUp } from '../lib/accounts.ts';
import { scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario, ScenarioOutcome } from '../lib/types.ts';

/** Jobs in the small history, and what the large one adds (BENCH_USAGE_HISTORY). */
const SMALL = 1_000;
const ADDED = Number(process.env.BENCH_USAGE_HISTORY ?? 120_000);
/** The history lies on the days before today (UTC), so today's partial day, counted from its rows, stays the same. */
const DAYS = 28;
const CONNECTIONS = 16;
/** Within this ratio of req/s, the read is taken as not growing with the history. */
const TARGET = 0.8;

interface Usage {
  generations: { total: number; succeeded: number };
}

/**
 * GET /v1/usage over a range that holds the whole history, with 1,000 jobs in it and then with 121,000: the
 * same latency, since whole days are read from the rollups (usage_rollups) and only the partial day at an
 * edge from its rows (docs/money.md). The history is the seed job (made through the API and run to its end)
 * copied in SQL over the DAYS days before today, and the workspace's rollups recounted from the rows, as the
 * service would have kept them. Each answer's total is checked against the rows.
 */
async function run(ctx: BenchContext): Promise<ScenarioOutcome> {
  const db = await scratchDatabase();
  let server: ExtraServer | undefined;
  try {
    server = await ctx.startService('service (PostgreSQL)', {
      DATABASE_URL: db.url,
      RATE_LIMIT_FREE: '1000000',
      RATE_LIMIT_TEAM: '1000000',
      LOCAL_PROVIDER_LATENCY_MS: '0',
    });
    const account = await signUp(server.url);
    const key = await createKey(server.url, account, ['generations.write', 'generations.read', 'usage.read']);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const seed = await fetch(`${server.url}/v1/generations`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ workspaceId: account.workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'seed' } }),
    });
    if (seed.status !== 201) throw new Error(`the seed job: ${seed.status} ${await seed.text()}`);
    const seedId = ((await seed.json()) as { id: string }).id;
    await untilSucceeded(db, seedId);

    const today = new Date();
    today.setUTCHours(0, 0, 0, 0);
    const from = new Date(today.getTime() - DAYS * 86_400_000).toISOString();
    const path = `/v1/usage?workspaceId=${account.workspaceId}&from=${encodeURIComponent(from)}&to=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`;
    const measure = async (jobs: number): Promise<LoadSummary> => {
      const res = await fetch(`${server!.url}${path}`, { headers });
      const usage = (await res.json()) as Usage;
      if (res.status !== 200 || usage.generations.total !== jobs)
        throw new Error(`GET /v1/usage: ${res.status}, total ${usage.generations?.total} where ${jobs} jobs are in the range`);
      return ctx.load({ server: server!, path, headers, connections: CONNECTIONS, title: `GET /v1/usage, ${jobs} jobs in the range` });
    };

    await copies(db, seedId, 'a', SMALL - 1, today);
    const small = await measure(SMALL);
    await copies(db, seedId, 'b', ADDED, today);
    const large = await measure(SMALL + ADDED);
    const ratio = Math.round((large.reqPerSec / small.reqPerSec) * 100) / 100;
    const { rows: rollups } = await db.query<{ n: string }>('select count(*) as n from usage_rollups where workspace_id = $1', [account.workspaceId]);
    return {
      result: large,
      baseline: small,
      ratio,
      target: TARGET,
      notes: [
        `GET /v1/usage over ${DAYS} days and today: ${SMALL} jobs in the range vs ${SMALL + ADDED}: ${Math.round(small.reqPerSec)} vs ${Math.round(large.reqPerSec)} req/s (ratio ${ratio}, target ≥ ${TARGET}); p50 ${small.latencyMs.p50} vs ${large.latencyMs.p50} ms, p99 ${small.latencyMs.p99} vs ${large.latencyMs.p99} ms; ${CONNECTIONS} clients`,
        `the history: the seed job copied in SQL over the ${DAYS} days before today, the workspace's ${rollups[0]?.n} rollup rows recounted from the rows; each answer's total checked against the jobs in the range`,
      ],
    };
  } finally {
    await server?.stop();
    await db.drop();
  }
}

async function untilSucceeded(db: ScratchDatabase, id: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await db.query<{ status: string }>('select status from generations where id = $1', [id]);
    if (rows[0]?.status === 'succeeded') return;
    if (Date.now() > deadline) throw new Error(`the seed job did not succeed: ${rows[0]?.status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * `count` copies of the seed job, succeeded, created over the DAYS days before `today`, then the workspace's
 * rollups recounted from its rows (the sums of migration 0012's backfill), and the tables analyzed.
 */
async function copies(db: ScratchDatabase, seedId: string, tag: string, count: number, today: Date): Promise<void> {
  await db.query(
    `insert into generations (id, workspace_id, api_key_id, user_id, mode, model_id, status, params, inputs, payment_mode, credits, project,
        idempotency_key, provider, provider_job_id, attempts, text_output, output_asset_ids, error_code, error_message, timeline, queue_deadline,
        created_at, updated_at, started_at, completed_at)
     select 'gen_usage' || $2 || lpad(n::text, 12, '0'), g.workspace_id, g.api_key_id, g.user_id, g.mode, g.model_id, g.status, g.params, g.inputs,
        g.payment_mode, g.credits, g.project, null, g.provider, g.provider_job_id, g.attempts, g.text_output, g.output_asset_ids, null, null, g.timeline,
        c.at + interval '1 hour', c.at, c.at, c.at, c.at + interval '1 second'
     from generations g,
       lateral (select n, $4::timestamptz - $5::int * interval '1 day' + (n::float8 / $3::int * $5::int * 86400) * interval '1 second' as at
                from generate_series(0, $3::int - 1) n) c
     where g.id = $1`,
    [seedId, tag, count, today.toISOString(), DAYS],
  );
  const { rows } = await db.query<{ workspace_id: string }>('select workspace_id from generations where id = $1', [seedId]);
  const workspaceId = rows[0]!.workspace_id;
  await db.query('delete from usage_rollups where workspace_id = $1', [workspaceId]);
  await db.query(
    `insert into usage_rollups (workspace_id, day, api_key_id, total, succeeded, failed, cancelled, expired, unfinished,
       credits, credits_from_balance, cost_cents, output_bytes)
     select g.workspace_id, (g.created_at at time zone 'UTC')::date, coalesce(g.api_key_id, ''),
            count(*), count(*) filter (where g.status = 'succeeded'), count(*) filter (where g.status = 'failed'),
            count(*) filter (where g.status = 'cancelled'), count(*) filter (where g.status = 'expired'),
            count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')),
            coalesce(sum(g.credits) filter (where l.generation_id is not null), 0),
            coalesce(sum(-l.reserved_credits), 0), coalesce(sum(-l.reserved_wallet_cents), 0), 0
       from generations g
       left join credit_ledger l on l.workspace_id = g.workspace_id and l.kind = 'capture' and l.generation_id = g.id
      where g.workspace_id = $1
      group by 1, 2, 3`,
    [workspaceId],
  );
  await db.query('analyze generations');
  await db.query('analyze usage_rollups');
}

export const usageHistory: Scenario = {
  name: 'usage-history',
  description: 'GET /v1/usage over a range holding 1,000 jobs vs 121,000 (PostgreSQL): the same latency whatever the history',
  budgetS: 600,
  run,
};
