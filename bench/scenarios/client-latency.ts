import net from 'node:net';
import { Agent, request } from 'undici';
import { round } from '../lib/load.ts';
import { backendPids, runPgbench, scratchDatabase, type ScratchDatabase } from '../lib/postgres.ts';
import { freePort, processCpuSeconds, processesCpuSeconds, startNodeServer, stopServer, waitUntilReady, type ChildServer } from '../lib/processes.ts';
import type { ExtraServer, LoadSummary, Scenario } from '../lib/types.ts';
import { measuredSummary } from '../lib/types.ts';
import { benchWorkspaces } from './generations.ts';

type BenchWorkspace = Awaited<ReturnType<typeof benchWorkspaces>>[number];

/**
 * One outside client as users run one, on PostgreSQL: Node's global fetch (undici inside, keep-alive), one
 * create after another with a Bearer key and a JSON body, jobs held at the provider so they stay unfinished.
 * In the same run and on the same service, the same creates from the `latency` scenario's client (undici's
 * request on an Agent of one connection) and from a bare socket writing HTTP/1.1 by hand (no client library:
 * what is left is the service's own time and the loopback).
 *
 * The creates go to one team-plan workspace at a time, as one user's would: the first 50 of each take its
 * job slots (their jobs start and are held), the rest queue; after CREATES_PER_WORKSPACE the next
 * workspace takes over (a workspace holds 500 unfinished jobs). The clients take workspaces in turn, so the
 * drift of a shared machine falls on each alike.
 */
const CREATES_PER_WORKSPACE = Number(process.env.BENCH_CLIENT_LATENCY_CREATES ?? 450);
/** The p50 an outside client's sequential creates should stay under on an idle machine. */
const P50_TARGET_MS = 1.5;
/** The most an outside client's create p50 may be of the floor's (bench/servers/durable-floor.ts), same client, same run. */
const FLOOR_RATIO_TARGET = 1.25;
const WORKSPACES_AT_ONCE = 8;
/**
 * pgbench's one-client one-row insert, run right after the clients: a gauge of how loaded the machine and its
 * database were (about 0.22 ms each on this 2-core machine when idle), to read the run's figures against.
 */
const INSERT_SCRIPT = "insert into bench_rows (payload) values ('one durable row');\n";
const GAUGE_S = 3;
/**
 * After the clients, the service and the database's backends are read for this long with no request: the CPU
 * that does not depend on the creates (held jobs' timers, pollers, sweeps, metrics), to set against theirs.
 */
const REST_S = 5;

type ClientName = 'fetch' | 'undici' | 'socket' | 'floor';

/** One create; resolves with the answer's status once its whole body is read. */
type Create = (ws: BenchWorkspace) => Promise<number>;

interface Client {
  name: ClientName;
  create: Create;
  close(): Promise<void>;
}

function fetchClient(url: string, name: ClientName = 'fetch'): Client {
  return {
    name,
    async create(ws) {
      const res = await fetch(`${url}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
        body: ws.body,
      });
      await res.text();
      return res.status;
    },
    close: async () => {},
  };
}

/** The `latency` scenario's client. */
function undiciClient(url: string): Client {
  const agent = new Agent({ connections: 1 });
  return {
    name: 'undici',
    async create(ws) {
      const res = await request(`${url}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json' },
        body: ws.body,
        dispatcher: agent,
      });
      await res.body.dump();
      return res.statusCode;
    },
    close: () => agent.close(),
  };
}

/** HTTP/1.1 written by hand on one kept-alive socket (answers have a Content-Length: the service's do). */
async function socketClient(url: string): Promise<Client> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received: Buffer = Buffer.alloc(0);
  let answered: ((status: number) => void) | undefined;
  let failed: ((error: Error) => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
    const end = received.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = received.subarray(0, end).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (received.length < end + 4 + length) return;
    received = received.subarray(end + 4 + length);
    answered?.(Number(head.slice(9, 12)));
  });
  socket.on('error', (error) => failed?.(error));
  socket.on('close', () => failed?.(new Error('the service closed the connection')));
  return {
    name: 'socket',
    create: (ws) =>
      new Promise<number>((resolve, reject) => {
        answered = resolve;
        failed = reject;
        socket.write(
          `POST /v1/generations HTTP/1.1\r\nhost: ${hostname}:${port}\r\nauthorization: Bearer ${ws.key}\r\n` +
            `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(ws.body)}\r\n\r\n${ws.body}`,
        );
      }),
    close: async () => {
      socket.destroy();
    },
  };
}

interface Tally {
  latencies: number[];
  errors: number;
  wallS: number;
  creates: number;
  serviceCpuS: number;
  databaseCpuS: number;
  clientCpuUs: number;
}

const emptyTally = (): Tally => ({ latencies: [], errors: 0, wallS: 0, creates: 0, serviceCpuS: 0, databaseCpuS: 0, clientCpuUs: 0 });

/** Fills one workspace with `count` creates from `client`, one after another; adds to `tally`. */
async function fillWorkspace(client: Client, ws: BenchWorkspace, count: number, server: { pid: number }, db: ScratchDatabase, tally: Tally): Promise<void> {
  const backends = await backendPids(db);
  const dbBefore = processesCpuSeconds(backends);
  const serviceBefore = processCpuSeconds(server.pid);
  const clientBefore = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const sent = performance.now();
    try {
      const status = await client.create(ws);
      if (status === 201) tally.latencies.push(performance.now() - sent);
      else tally.errors++;
    } catch {
      tally.errors++;
    }
  }
  tally.wallS += (performance.now() - t0) / 1000;
  tally.creates += count;
  const clientCpu = process.cpuUsage(clientBefore);
  tally.clientCpuUs += clientCpu.user + clientCpu.system;
  const serviceAfter = processCpuSeconds(server.pid);
  if (serviceBefore !== undefined && serviceAfter !== undefined) tally.serviceCpuS += serviceAfter - serviceBefore;
  const dbAfter = processesCpuSeconds(backends);
  for (const [pid, s] of dbAfter) tally.databaseCpuS += s - (dbBefore.get(pid) ?? s);
}

/** Statement texts this database ran, with their calls so far; undefined where pg_stat_statements is not loaded. */
async function statementCalls(db: ScratchDatabase): Promise<Map<string, number> | undefined> {
  try {
    await db.query('create extension if not exists pg_stat_statements');
    const { rows } = await db.query<{ query: string; calls: string }>(
      `select query, calls from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())`,
    );
    return new Map(rows.map((r) => [r.query, Number(r.calls)]));
  } catch {
    return undefined;
  }
}

/** The statements run per create between two readings of statementCalls, most frequent first. */
function statementsPerCreate(before: Map<string, number>, after: Map<string, number>, creates: number): string {
  const per = [...after]
    .map(([query, calls]) => ({ query: query.replace(/\s+/g, ' ').slice(0, 60), n: (calls - (before.get(query) ?? 0)) / creates }))
    .filter((s) => s.n >= 0.05)
    .sort((a, b) => b.n - a.n);
  const total = per.reduce((sum, s) => sum + s.n, 0);
  return `${round(total, 2)} statements per create: ${per.map((s) => `${round(s.n, 2)} × ${s.query}…`).join('; ')}`;
}

/** The service's and the database's backends' CPU over REST_S with no request, as percent of a core. */
async function atRest(server: ExtraServer, db: ScratchDatabase): Promise<{ servicePercent: number; databasePercent: number }> {
  const backends = await backendPids(db);
  const dbBefore = processesCpuSeconds(backends);
  const before = processCpuSeconds(server.pid) ?? 0;
  await new Promise((resolve) => setTimeout(resolve, REST_S * 1000));
  const after = processCpuSeconds(server.pid) ?? 0;
  let database = 0;
  for (const [pid, s] of processesCpuSeconds(backends)) database += s - (dbBefore.get(pid) ?? s);
  return { servicePercent: round(((after - before) / REST_S) * 100, 2), databasePercent: round((database / REST_S) * 100, 2) };
}

function quantile(sorted: number[], p: number): number {
  return round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN, 2);
}

function figures(t: Tally) {
  const sorted = [...t.latencies].sort((a, b) => a - b);
  const perCreate = (s: number) => (t.creates === 0 ? NaN : Math.round((s * 1e6) / t.creates));
  return {
    rate: t.wallS === 0 ? 0 : t.latencies.length / t.wallS,
    p50: quantile(sorted, 50),
    p90: quantile(sorted, 90),
    p99: quantile(sorted, 99),
    max: quantile(sorted, 100),
    mean: round(sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length), 2),
    serviceUs: perCreate(t.serviceCpuS),
    databaseUs: perCreate(t.databaseCpuS),
    clientUs: t.creates === 0 ? NaN : Math.round(t.clientCpuUs / t.creates),
  };
}

function summary(name: string, t: Tally, title = `one client (${name}), sequential durable POST /v1/generations, keep-alive (PostgreSQL)`): LoadSummary {
  const f = figures(t);
  return measuredSummary({
    title,
    url: '/v1/generations',
    method: 'POST',
    connections: 1,
    durationS: round(t.wallS, 2),
    reqPerSec: round(f.rate, 1),
    totalRequests: t.latencies.length,
    latencyMs: { mean: f.mean, p50: f.p50, p90: f.p90, p99: f.p99, max: f.max },
    errors: t.errors,
    serverCpuUsPerRequest: f.serviceUs,
  });
}

export const clientLatency: Scenario = {
  name: 'client-latency',
  description: `one outside client's sequential creates through Node's fetch vs the latency scenario's client and a bare socket, same service and run (PostgreSQL, jobs held)`,
  async run(ctx) {
    const db = await scratchDatabase();
    let server: ExtraServer | undefined;
    let floor: ChildServer | undefined;
    const clients: Client[] = [];
    try {
      server = await ctx.startService('service (client latency, provider latency 10 minutes)', {
        DATABASE_URL: db.url,
        RATE_LIMIT_TEAM: '1000000',
        LOCAL_PROVIDER_LATENCY_MS: '600000',
      });
      floor = startNodeServer('durable floor (node:http + one committed INSERT)', 'bench/servers/durable-floor.ts', await freePort(), { DATABASE_URL: db.url });
      await waitUntilReady(floor, '/health', 60_000);
      clients.push(fetchClient(server.url), undiciClient(server.url), await socketClient(server.url), fetchClient(floor.url, 'floor'));
      const spare: BenchWorkspace[] = [];
      let used = 0;
      let last: BenchWorkspace | undefined;
      const nextWorkspace = async (): Promise<BenchWorkspace> => {
        if (spare.length === 0) spare.push(...(await benchWorkspaces(server!, db, WORKSPACES_AT_ONCE)));
        used++;
        last = spare.shift()!;
        return last;
      };
      // The floor takes the same body and ignores the key: it needs no workspace of its own.
      const workspaceFor = async (client: Client) => (client.name === 'floor' && last ? last : nextWorkspace());
      const serverOf = (client: Client) => (client.name === 'floor' ? floor! : server!);
      // Warm-up (discarded): one workspace's worth from each client.
      for (const client of clients)
        await fillWorkspace(client, await workspaceFor(client), Math.min(CREATES_PER_WORKSPACE, 200), serverOf(client), db, emptyTally());
      const tallies = new Map<ClientName, Tally>(clients.map((c) => [c.name, emptyTally()]));
      const callsBefore = await statementCalls(db);
      ctx.log(`client latency: ${CREATES_PER_WORKSPACE} creates per workspace, clients in turn, until each has run ${ctx.options.durationS} s`);
      while ([...tallies.values()].some((t) => t.wallS < ctx.options.durationS)) {
        for (const client of clients) {
          const tally = tallies.get(client.name)!;
          if (tally.wallS < ctx.options.durationS) await fillWorkspace(client, await workspaceFor(client), CREATES_PER_WORKSPACE, serverOf(client), db, tally);
        }
      }
      const [viaFetch, viaUndici, viaSocket, viaFloor] = (['fetch', 'undici', 'socket', 'floor'] as const).map((n) => figures(tallies.get(n)!));
      const callsAfter = callsBefore && (await statementCalls(db));
      const creates = [...tallies].reduce((sum, [name, t]) => sum + (name === 'floor' ? 0 : t.creates), 0);
      const statements = callsBefore && callsAfter ? statementsPerCreate(callsBefore, callsAfter, creates) : undefined;
      const rest = await atRest(server, db);
      const unfinished = Number(
        (await db.query<{ n: string }>(`select count(*) as n from generations where status in ('queued', 'reserved', 'submitted', 'running')`)).rows[0]!.n,
      );
      ctx.log(
        `client latency: at rest with ${unfinished} unfinished jobs (${REST_S} s, no request): service ${rest.servicePercent} % of a core, database ${rest.databasePercent} %`,
      );
      if (statements) ctx.log(`client latency: ${statements}`);
      await db.query('create table if not exists bench_rows (id bigserial primary key, payload text not null, created_at timestamptz not null default now())');
      const gauge = await runPgbench(db.url, INSERT_SCRIPT, 1, GAUGE_S);
      ctx.log(`client latency: pgbench's one-client insert right after: ${gauge.latencyMsAverage} ms average`);
      for (const [name, f] of [
        ['fetch', viaFetch!],
        ['undici', viaUndici!],
        ['socket', viaSocket!],
        ['floor', viaFloor!],
      ] as const) {
        ctx.log(
          `client latency, ${name}: ${Math.round(f.rate)} creates/s, p50 ${f.p50} ms, p90 ${f.p90} ms, p99 ${f.p99} ms; CPU per create: service ${f.serviceUs} µs, database ${f.databaseUs} µs, client ${f.clientUs} µs`,
        );
      }
      const result = summary('Node fetch', tallies.get('fetch')!);
      // The baseline is the floor of a durable create: node:http, one committed INSERT, the same client (Node fetch), same run.
      const baseline = summary(
        'durable floor',
        tallies.get('floor')!,
        'one client (Node fetch), sequential POST to node:http + one committed INSERT, keep-alive (PostgreSQL): the floor',
      );
      const floorRatio = round(viaFetch!.p50 / viaFloor!.p50, 2);
      const line = (name: string, f: ReturnType<typeof figures>) =>
        `${name}: ${round(f.rate, 1)} creates/s, p50 ${f.p50} ms, p90 ${f.p90} ms, p99 ${f.p99} ms, max ${f.max} ms; ` +
        `CPU per create: the service ${f.serviceUs} µs, the database's backends ${f.databaseUs} µs, the client ${f.clientUs} µs`;
      return {
        result,
        baseline,
        notes: [
          `${used} team-plan workspaces, ${CREATES_PER_WORKSPACE} creates into each from one client (its first 50 jobs start and are held by a 10-minute provider latency, the rest queue), the three clients in turn, each measured for ${ctx.options.durationS} s at least`,
          line('Node fetch', viaFetch!),
          line("undici request (the latency scenario's client)", viaUndici!),
          line('a bare socket (HTTP/1.1 by hand: the service and the loopback alone)', viaSocket!),
          line('the floor (bench/servers/durable-floor.ts: node:http, one committed INSERT, Node fetch)', viaFloor!),
          `the service's create p50 ÷ the floor's, same client (Node fetch), same run: ${floorRatio}× (target ≤ ${FLOOR_RATIO_TARGET}: ${floorRatio <= FLOOR_RATIO_TARGET ? 'met' : 'not met'})`,
          `at rest right after, ${unfinished} unfinished jobs held or queued, no request for ${REST_S} s: the service used ${rest.servicePercent} % of a core, the database's backends ${rest.databasePercent} % ` +
            `(as CPU per create at fetch's rate: ${Math.round((rest.servicePercent * 1e4) / Math.max(1, viaFetch!.rate))} µs of the service's ${viaFetch!.serviceUs})`,
          ...(statements ? [`the database, measured by pg_stat_statements over the measured creates: ${statements}`] : []),
          `pgbench's one-client one-row insert on the same database right after (${GAUGE_S} s): ${gauge.latencyMsAverage} ms average, ${Math.round(gauge.tps)} tps: the machine's load at the time`,
          `fetch ÷ undici request: creates/s ${(viaFetch!.rate / viaUndici!.rate).toFixed(2)}, p50 ${(viaFetch!.p50 / viaUndici!.p50).toFixed(2)}×; fetch p50 ${viaFetch!.p50} ms against ${P50_TARGET_MS} ms: ${viaFetch!.p50 <= P50_TARGET_MS ? 'met' : 'not met'} (the target is for an idle machine: see the run's load average)`,
        ],
      };
    } finally {
      for (const client of clients) await client.close().catch(() => {});
      await server?.stop();
      if (floor) await stopServer(floor);
      await db.drop();
    }
  },
};
