import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import { createKey, signUp } from '../lib/accounts.ts';
import { round } from '../lib/load.ts';
import { scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import type { BenchContext, ExtraServer, Scenario, ScenarioOutcome } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';

/** A job's time at the provider in the delay run (LOCAL_PROVIDER_LATENCY_MS), the one-slot case of docs/generations.md. */
const JOB_MS = 200;
/** A's backlog when B's single job comes. */
const BACKLOG = 20;
/** The weights run: shorter jobs, so its 1,000 grants take well under a minute. */
const SHORT_JOB_MS = 20;
const GRANTS = 1_000;
/** Jobs each workspace of the weights run creates (its queue kept full: a refused create is tried again). */
const WEIGHTED_JOBS = { heavy: 900, light: 400 };
const CREDITS = 10_000_000;
const MODEL = 'local/text-mini';

interface Workspace {
  id: string;
  key: string;
}

/** The shipped catalog with the team plan's fairShareWeight at 3 (pro keeps the default, 1). */
async function weightedCatalog(dir: string): Promise<string> {
  const catalog = parse(await readFile(path.join(import.meta.dirname, '../../catalog/default.yaml'), 'utf8')) as {
    plans: Array<{ id: string; fairShareWeight?: number }>;
  };
  for (const plan of catalog.plans) if (plan.id === 'team') plan.fairShareWeight = 3;
  const file = path.join(dir, 'catalog.yaml');
  await writeFile(file, stringify(catalog));
  return file;
}

/** Workspaces of one account on the given plans, with credits, set in the database before their actors first load them. */
async function workspaces(server: ExtraServer, db: ScratchDatabase, plans: string[]): Promise<Workspace[]> {
  const account = await signUp(server.url);
  const ids = [account.workspaceId];
  while (ids.length < plans.length) {
    const res = await fetch(`${server.url}/v1/workspaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: account.cookie },
      body: JSON.stringify({ name: `fairness ${ids.length}` }),
    });
    if (res.status !== 201) throw new Error(`creating a workspace: ${res.status} ${await res.text()}`);
    ids.push(((await res.json()) as { id: string }).id);
  }
  for (const [i, id] of ids.entries()) await db.query('update workspaces set plan = $2 where id = $1', [id, plans[i]]);
  await db.query(
    `insert into workspace_accounts (workspace_id, available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, updated_at)
     select id, $2, 0, 0, 0, false, now() from unnest($1::text[]) as id`,
    [ids, CREDITS],
  );
  await db.query(
    `insert into credit_ledger (id, workspace_id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference, created_at)
     select 'led_fair_' || id, id, 'grant', $2, 0, 0, 0, null, 'bench:credits', now() from unnest($1::text[]) as id`,
    [ids, CREDITS],
  );
  const out: Workspace[] = [];
  for (const id of ids)
    out.push({ id, key: await createKey(server.url, { cookie: account.cookie, workspaceId: id }, ['generations.write', 'generations.read']) });
  return out;
}

/** One create; undefined when the plan's unfinished-job cap refused it. */
async function create(server: ExtraServer, ws: Workspace): Promise<string | undefined> {
  const res = await fetch(`${server.url}/v1/generations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ workspaceId: ws.id, mode: 'text_to_text', model: MODEL, params: { prompt: 'Say hello in five words.' } }),
  });
  const text = await res.text();
  if (res.status === 201) return (JSON.parse(text) as { id: string }).id;
  if (res.status === 429 || text.includes('plan_limit_reached')) return undefined;
  throw new Error(`POST /v1/generations: ${res.status} ${text}`);
}

/** `count` jobs of the workspace in one POST /v1/generations/batch; their ids in order. */
async function createBatch(server: ExtraServer, ws: Workspace, count: number): Promise<string[]> {
  const item = { mode: 'text_to_text', model: MODEL, params: { prompt: 'Say hello in five words.' } };
  const res = await fetch(`${server.url}/v1/generations/batch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ workspaceId: ws.id, items: Array.from({ length: count }, () => item) }),
  });
  const body = (await res.json()) as { created: number; results: Array<{ body: { id: string } }> };
  if (res.status !== 200 || body.created !== count) throw new Error(`POST /v1/generations/batch: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
  return body.results.map((r) => r.body.id);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Runs `measure` against a service with one provider slot and jobs of `jobMs`, on a scratch PostgreSQL database. */
async function withService<T>(ctx: BenchContext, name: string, jobMs: number, measure: (server: ExtraServer, db: ScratchDatabase) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'gs-bench-fair-'));
  const db = await scratchDatabase();
  let server: ExtraServer | undefined;
  try {
    server = await ctx.startService(name, {
      DATABASE_URL: db.url,
      REDIS_URL: '',
      CATALOG_FILE: await weightedCatalog(dir),
      LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '1',
      LOCAL_PROVIDER_LATENCY_MS: String(jobMs),
      LOCAL_PROVIDER_FAILURE_PERCENT: '0',
      RATE_LIMIT_PRO: '1000000',
      RATE_LIMIT_TEAM: '1000000',
    });
    return await measure(server, db);
  } finally {
    await server?.stop();
    await db.drop();
    await rm(dir, { recursive: true, force: true });
  }
}

/** When the job got its slot (its timeline's `reserved`), in ms. */
async function reservedAt(db: ScratchDatabase, id: string): Promise<{ created: number; reserved: number | undefined }> {
  const { rows } = await db.query<{ created_at: Date; timeline: Array<{ status: string; at: string }> }>(
    'select created_at, timeline from generations where id = $1',
    [id],
  );
  const at = rows[0]?.timeline.find((e) => e.status === 'reserved')?.at;
  return { created: rows[0]!.created_at.getTime(), reserved: at === undefined ? undefined : Date.parse(at) };
}

async function runDelay(ctx: BenchContext): Promise<ScenarioOutcome> {
  return withService(ctx, 'fairness service', JOB_MS, async (server, db) => {
    const [a, b] = await workspaces(server, db, ['pro', 'pro']);
    // a's jobs in one batch, so all are queued at once; b's job comes once a's first holds the slot and the other 20 wait.
    const aJobs = await createBatch(server, a!, BACKLOG + 1);
    await until("a's first job to take the slot", async () => (await reservedAt(db, aJobs[0]!)).reserved !== undefined);
    const bJob = (await create(server, b!))!;
    await until("b's job to take a slot", async () => (await reservedAt(db, bJob)).reserved !== undefined);
    const { created, reserved } = await reservedAt(db, bJob);
    const delayMs = reserved! - created;
    const aTimes = await Promise.all(aJobs.slice(1).map((id) => reservedAt(db, id)));
    const waitingWhenBCame = aTimes.filter((r) => r.reserved === undefined || r.reserved > created).length;
    const aheadOfB = aTimes.filter((r) => r.reserved !== undefined && r.reserved > created && r.reserved < reserved!).length;
    ctx.log(
      `fairness: b's job waited ${delayMs} ms (${round(delayMs / JOB_MS, 2)} job-times); a had ${waitingWhenBCame} jobs queued when it came, ${aheadOfB} of which started before it`,
    );
    const jobTimes = round(delayMs / JOB_MS, 2);
    return {
      result: measuredSummary({
        title: `b's single job behind a's ${BACKLOG} queued: start delay`,
        url: 'POST /v1/generations',
        method: 'POST',
        connections: 1,
        durationS: round(delayMs / 1000, 3),
        reqPerSec: 0,
        totalRequests: BACKLOG + 2,
        latencyMs: { mean: delayMs, p50: delayMs, p90: delayMs, p99: delayMs, max: delayMs },
      }),
      ratio: jobTimes,
      target: 2,
      targetAtMost: true,
      notes: [
        `one provider slot (LOCAL_PROVIDER_MAX_CONCURRENT_JOBS=1), ${JOB_MS} ms jobs, PostgreSQL: workspace a (pro) creates ${BACKLOG + 1} jobs in one batch, the first takes the slot, then workspace b (pro) creates one`,
        `ratio = b's job's wait from its creation to its slot (timeline's reserved) in job-times: ${delayMs} ms = ${jobTimes} job-times; a's jobs queued when it came: ${waitingWhenBCame}, of which started before it: ${aheadOfB}`,
      ],
    };
  });
}

async function runWeights(ctx: BenchContext): Promise<ScenarioOutcome> {
  return withService(ctx, 'fairness weights service', SHORT_JOB_MS, async (server, db) => {
    const [heavy, light] = await workspaces(server, db, ['team', 'pro']);
    const started = Date.now();
    // Each workspace keeps its queue full: a create refused by its plan's cap is tried again shortly.
    const fill = async (ws: Workspace, jobs: number) => {
      for (let made = 0; made < jobs; ) {
        if (await create(server, ws)) made++;
        else await sleep(10);
      }
    };
    const firstLight = (async () => {
      await sleep(50);
      return fill(light!, WEIGHTED_JOBS.light);
    })();
    await Promise.all([fill(heavy!, WEIGHTED_JOBS.heavy), firstLight]);
    // Counted from light's first job on (both backlogged from then): the next GRANTS slots, by the time each was reserved.
    const { rows: firstRows } = await db.query<{ at: Date }>('select min(created_at) as at from generations where workspace_id = $1', [light!.id]);
    const from = firstRows[0]!.at;
    const reservedOrder = async () =>
      (
        await db.query<{ workspace_id: string }>(
          `select workspace_id from generations g, lateral (select (e->>'at')::timestamptz as at from jsonb_array_elements(g.timeline) e where e->>'status' = 'reserved') r
        where g.workspace_id = any($1) and r.at >= $2 order by r.at, g.id limit $3`,
          [[heavy!.id, light!.id], from, GRANTS],
        )
      ).rows;
    await until(`${GRANTS} grants`, async () => (await reservedOrder()).length >= GRANTS, 300_000);
    const order = await reservedOrder();
    const seconds = (Date.now() - started) / 1000;
    const heavyGrants = order.filter((r) => r.workspace_id === heavy!.id).length;
    const lightGrants = order.length - heavyGrants;
    const share = lightGrants > 0 ? heavyGrants / lightGrants : Number.POSITIVE_INFINITY;
    const error = round(Math.abs(share - 3) / 3, 3);
    ctx.log(
      `fairness-weights: of ${order.length} grants, ${heavyGrants} to the weight-3 workspace and ${lightGrants} to the weight-1 one (${round(share, 3)}:1, ${round(error * 100, 1)} % off 3:1) in ${round(seconds, 1)} s`,
    );
    return {
      result: measuredSummary({
        title: `${GRANTS} grants between weights 3 and 1`,
        url: 'POST /v1/generations',
        method: 'POST',
        connections: 2,
        durationS: round(seconds, 1),
        reqPerSec: round(order.length / seconds, 1),
        totalRequests: WEIGHTED_JOBS.heavy + WEIGHTED_JOBS.light,
      }),
      ratio: error,
      target: 0.1,
      targetAtMost: true,
      notes: [
        `one provider slot, ${SHORT_JOB_MS} ms jobs (shorter than the delay run's ${JOB_MS} ms so the ${GRANTS} grants take about a minute), PostgreSQL: a team-plan workspace (fairShareWeight 3 in the scenario's catalog) and a pro-plan one (1), both kept backlogged`,
        `ratio = |share − 3| ÷ 3 over the ${GRANTS} grants from the second workspace's first job on: ${heavyGrants}:${lightGrants} = ${round(share, 3)}:1`,
      ],
    };
  });
}

const budgetS = 240;

export const fairness: Scenario = {
  name: 'fairness',
  description: `one provider slot, ${JOB_MS} ms jobs: start delay of workspace b's single job while a has ${BACKLOG} queued, in job-times (target ≤ 2)`,
  budgetS,
  run: runDelay,
};

export const fairnessWeights: Scenario = {
  name: 'fairness-weights',
  description: `one provider slot, ${SHORT_JOB_MS} ms jobs: ${GRANTS} grants between workspaces of weights 3 and 1, relative error of the share against 3:1 (target ≤ 0.10)`,
  budgetS: 420,
  run: runWeights,
};
