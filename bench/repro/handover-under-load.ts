/**
 * Reproduction (not a test, not a bench scenario): how long a node joining a loaded cluster waits for its
 * share of the shards. Two nodes hold 64 shards 32/32 with many unfinished jobs (held at the provider or
 * queued behind them); a third node joins while clients may keep creating; the script reports when the
 * shards reach 22/21/21 and what the nodes logged about their drains.
 *
 *   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test TEST_REDIS_URL=redis://127.0.0.1:6379 \
 *     node --import tsx bench/repro/handover-under-load.ts
 *
 * REPRO_JOBS (default 4000): unfinished jobs made before the join; REPRO_WORKSPACES (default 24, team plan:
 * 50 running and 500 unfinished each); REPRO_LOAD=1 keeps the clients creating during the join;
 * REPRO_LATENCY_MS (default 600000): the local provider's latency (jobs in flight hold their drain);
 * REPRO_CLIENTS (default 32): concurrent clients; REPRO_LOGS=<dir>: each node's log written there;
 * REPRO_WATCH_MS (default 30000): how long the leases are watched once spread.
 */
import { Agent, request } from 'undici';
import type { Test } from 'tap';
import { benchWorkspaces } from '../scenarios/generations.ts';
import { scratchDatabase } from '../lib/postgres.ts';
import type { ExtraServer } from '../lib/types.ts';
import { clusterEnv, startClusterNode, type NodeProcess } from '../../test/cluster/support.ts';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const SHARDS = 64;
const JOBS = Number(process.env.REPRO_JOBS ?? 4000);
const WORKSPACES = Number(process.env.REPRO_WORKSPACES ?? 24);
const LOAD = process.env.REPRO_LOAD === '1';
const CLIENTS = Number(process.env.REPRO_CLIENTS ?? 32);

const teardowns: Array<() => unknown> = [];
const t = {
  teardown: (fn: () => unknown) => {
    teardowns.push(fn);
  },
} as unknown as Test;
const started = Date.now();
const log = (text: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${text}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const db = await scratchDatabase();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'gs-repro-'));
try {
  const env = clusterEnv(db.url, SHARDS, {
    LOCAL_PROVIDER_LATENCY_MS: process.env.REPRO_LATENCY_MS ?? '600000',
    LOG_LEVEL: 'info',
    RATE_LIMIT_TEAM: '1000000',
    CLUSTER_HEARTBEAT_MS: '1000',
    CLUSTER_DEAD_AFTER_MS: '5000',
    CLUSTER_LEASE_MS: '5000',
    SHUTDOWN_TIMEOUT_MS: '15000',
  });
  const counts = async () => {
    const { rows } = await db.query<{ owner: string; n: string }>(
      'select owner_node_id as owner, count(*) as n from cluster_shard_leases where expires_at > now() group by 1 order by 1',
    );
    return Object.fromEntries(rows.map((r) => [r.owner, Number(r.n)]));
  };
  const nodes: NodeProcess[] = [];
  for (const id of ['a', 'b']) nodes.push(await startClusterNode(t, id, env, dataDir));
  // Settled: 32/32 over two seconds (a shard handed over is adopted by its receiver at its next round).
  for (let since = Infinity; ; ) {
    const c = await counts();
    if (c.a !== 32 || c.b !== 32) since = Infinity;
    else if (since === Infinity) since = Date.now();
    else if (Date.now() - since >= 2_000) break;
    await sleep(250);
  }
  log('a and b hold 32 shards each');
  const workspaces = await benchWorkspaces({ url: nodes[0]!.url } as ExtraServer, db, WORKSPACES);
  const agent = new Agent({ connections: CLIENTS });
  let creating = true;
  let made = 0;
  const statuses: Record<string, number> = {};
  const clients = Array.from({ length: CLIENTS }, async (_, i) => {
    for (let k = 0; creating; k++) {
      if (!LOAD && made >= JOBS) return;
      const node = nodes[(i + k) % 2]!;
      const ws = workspaces[(i + k * CLIENTS) % workspaces.length]!;
      try {
        const res = await request(`${node.url}/v1/generations`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
          body: ws.body,
          dispatcher: agent,
        });
        await res.body.dump();
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        if (res.statusCode === 201) made++;
      } catch {
        statuses.error = (statuses.error ?? 0) + 1;
      }
    }
  });
  while (made < JOBS) await sleep(250);
  const unfinished = async () =>
    (
      await db.query<{ status: string; n: string }>(
        `select status, count(*) as n from generations where status in ('queued', 'reserved', 'submitted', 'running') group by 1 order by 1`,
      )
    ).rows
      .map((r) => `${r.status} ${r.n}`)
      .join(', ');
  log(`${made} jobs created; unfinished: ${await unfinished()}; load during the join: ${LOAD ? 'yes' : 'no'}`);

  const joinedAt = Date.now();
  const c = await startClusterNode(t, 'c', env, dataDir);
  nodes.push(c);
  const listeningAt = Date.now();
  log('c listening');
  let spreadAt: number | undefined;
  let last = '';
  while (Date.now() - joinedAt < 240_000) {
    const now = await counts();
    const view = JSON.stringify(now);
    if (view !== last) {
      log(`leases ${view}`);
      last = view;
    }
    if ([now.a, now.b, now.c].sort().join() === '21,21,22') {
      spreadAt = Date.now();
      break;
    }
    await sleep(250);
  }
  log(
    spreadAt
      ? `spread 22/21/21 ${((spreadAt - listeningAt) / 1000).toFixed(1)} s after c listened (${((spreadAt - joinedAt) / 1000).toFixed(1)} s after its process started)`
      : 'NOT spread after 240 s',
  );
  // Then watch a while longer: does the spread hold (a node starved by its recoveries may be declared dead)?
  const watchUntil = Date.now() + Number(process.env.REPRO_WATCH_MS ?? 30_000);
  while (Date.now() < watchUntil) {
    const now = await counts();
    const view = JSON.stringify(now);
    if (view !== last) {
      log(`leases ${view}`);
      last = view;
    }
    await sleep(250);
  }
  creating = false;
  await Promise.all(clients);
  await agent.close();
  log(`create answers: ${JSON.stringify(statuses)}; unfinished now: ${await unfinished()}`);
  if (process.env.REPRO_LOGS) for (const node of nodes) await writeFile(path.join(process.env.REPRO_LOGS, `${node.id}.log`), node.child.lines.join('\n'));
  for (const node of nodes) {
    const drains = node.child.lines.filter((line) =>
      /drained before handover|still in flight at the drain deadline|handover failed|shard lost|round failed|declared dead|expelled|debug/.test(line),
    );
    const summary = new Map<string, number>();
    for (const line of drains) {
      const entry = JSON.parse(line) as { msg: string; reason?: string };
      const msg = entry.reason ? `${entry.msg} (${entry.reason})` : entry.msg;
      summary.set(msg, (summary.get(msg) ?? 0) + 1);
    }
    log(`${node.id}: ${JSON.stringify(Object.fromEntries(summary))}`);
    const times = drains
      .map((line) => JSON.parse(line) as { time: string; msg: string })
      .filter((e) => e.msg === 'shard drained before handover')
      .map((e) => Date.parse(e.time));
    const late = times.filter((time) => time >= listeningAt);
    if (late.length > 0)
      log(
        `${node.id}: ${late.length} drains ended between ${((late[0]! - listeningAt) / 1000).toFixed(1)} s and ${((late.at(-1)! - listeningAt) / 1000).toFixed(1)} s after c listened`,
      );
  }
} finally {
  for (const fn of teardowns.reverse()) await fn();
  await db.drop();
  await rm(dataDir, { recursive: true, force: true });
}
