import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { processesCpuSeconds } from './processes.ts';

/** The PostgreSQL server the Postgres scenarios use (a scratch database is made on it per scenario). */
export function benchPostgresUrl(): string {
  return process.env.BENCH_POSTGRES_URL?.trim() || 'postgres://postgres@127.0.0.1:5432/test';
}

export interface ScratchDatabase {
  url: string;
  name: string;
  /** Runs SQL on the scratch database (a pooled client of its own). */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<pg.QueryResult<R>>;
  /** Closes the pool and drops the database (after the servers using it stopped). */
  drop(): Promise<void>;
}

/** The PostgreSQL backends connected to a scratch database now (their CPU is readable in /proc when PostgreSQL runs on this machine). */
export async function backendPids(db: ScratchDatabase): Promise<number[]> {
  return (await db.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [db.name])).rows.map((r) => r.pid);
}

/** A new, empty database on the bench server, dropped by drop(). */
export async function scratchDatabase(): Promise<ScratchDatabase> {
  const adminUrl = benchPostgresUrl();
  const name = `gs_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.href, max: 2 });
  // An idle client's connection may be ended by the server (the drop below forces it): not a crash.
  pool.on('error', () => {});
  return {
    url: url.href,
    name,
    query: (sql, params) => pool.query(sql, params as unknown[]),
    async drop() {
      await pool.end();
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      try {
        await again.query(`drop database if exists ${name} with (force)`);
      } finally {
        await again.end();
      }
    },
  };
}

export interface PgbenchResult {
  clients: number;
  tps: number;
  latencyMsAverage: number;
  transactions: number;
  command: string;
  /**
   * CPU seconds its backend(s) used, where asked for (runPgbench's `backendsOf`) and readable: read every
   * BACKEND_SAMPLE_MS while it runs, so the last interval before each backend ends (at most that long) is not counted.
   */
  backendCpuSeconds?: number;
}

const BACKEND_SAMPLE_MS = 100;

/**
 * Reads, every BACKEND_SAMPLE_MS until stopped, the CPU of the backends of `db` that were not there when it
 * started (those of a client started right after). `stop` gives their total, or undefined when none could be
 * read or a reading failed.
 */
async function sampleNewBackends(db: ScratchDatabase): Promise<{ stop(): Promise<number | undefined> }> {
  const before = new Set(await backendPids(db));
  const seen = new Map<number, number>();
  let sampling = true;
  const loop = (async () => {
    while (sampling) {
      for (const [pid, s] of processesCpuSeconds((await backendPids(db)).filter((pid) => !before.has(pid)))) seen.set(pid, s);
      await new Promise((resolve) => setTimeout(resolve, BACKEND_SAMPLE_MS));
    }
  })().then(
    () => true,
    () => false,
  );
  return {
    async stop() {
      sampling = false;
      const ok = await loop;
      return ok && seen.size > 0 ? [...seen.values()].reduce((a, b) => a + b, 0) : undefined;
    },
  };
}

/**
 * pgbench (PGBENCH, default `pgbench` on PATH) running `script` (one transaction per run of the script)
 * on `databaseUrl` for `durationS` seconds with `clients` connections, with synchronous_commit on for its
 * sessions (PGOPTIONS), so every commit waits for its WAL flush as the service's commits do.
 */
export async function runPgbench(
  databaseUrl: string,
  script: string,
  clients: number,
  durationS: number,
  backendsOf?: ScratchDatabase,
): Promise<PgbenchResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'gs-pgbench-'));
  try {
    const file = path.join(dir, 'script.sql');
    await writeFile(file, script);
    const bin = process.env.PGBENCH?.trim() || 'pgbench';
    const args = ['-n', '-f', file, '-c', String(clients), '-j', String(Math.min(clients, 2)), '-T', String(durationS), databaseUrl];
    const backends = backendsOf ? await sampleNewBackends(backendsOf) : undefined;
    let output: string;
    let backendCpuSeconds: number | undefined;
    try {
      output = await new Promise<string>((resolve, reject) => {
        execFile(bin, args, { env: { ...process.env, PGOPTIONS: '-c synchronous_commit=on' }, timeout: (durationS + 60) * 1000 }, (error, stdout, stderr) => {
          if (error) reject(new Error(`${bin} failed: ${error.message}\n${stderr}`));
          else resolve(stdout);
        });
      });
    } finally {
      backendCpuSeconds = await backends?.stop();
    }
    const tps = /tps = ([\d.]+)/.exec(output);
    const latency = /latency average = ([\d.]+) ms/.exec(output);
    const transactions = /number of transactions actually processed: (\d+)/.exec(output);
    if (!tps) throw new Error(`could not read pgbench's output:\n${output}`);
    return {
      clients,
      tps: Number(tps[1]),
      latencyMsAverage: latency ? Number(latency[1]) : NaN,
      transactions: transactions ? Number(transactions[1]) : 0,
      command: `pgbench ${args.slice(0, -1).join(' ').replace(file, '<one insert>')}`,
      ...(backendCpuSeconds === undefined ? {} : { backendCpuSeconds }),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
