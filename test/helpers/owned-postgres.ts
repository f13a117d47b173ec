import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Test } from 'tap';
import { freePort } from './ports.ts';

const run = promisify(execFile);

/** Where the PostgreSQL server binaries are looked for (PG_BIN first). */
const BIN_DIRS = [process.env.PG_BIN, '/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/14/bin'];

/** A PostgreSQL cluster that one test creates, stops and starts at will, and removes when it ends. */
export interface OwnedPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  url: string;
  port: number;
  /** Stops the server: `immediate` is a crash (no shutdown checkpoint, backends killed), `fast` a clean stop. */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  start(): Promise<void>;
}

/** The directory holding initdb and pg_ctl, or undefined when no PostgreSQL server is installed. */
export async function findPostgresBin(): Promise<string | undefined> {
  for (const dir of BIN_DIRS) {
    if (!dir) continue;
    try {
      await fs.access(path.join(dir, 'initdb'));
      await fs.access(path.join(dir, 'pg_ctl'));
      return dir;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * initdb on a temporary directory, then a server on a free port listening on 127.0.0.1 and on a socket in
 * that directory. initdb refuses to run as root: as root, the cluster belongs to the `postgres` user.
 */
export async function createOwnedPostgres(t: Test, bin: string): Promise<OwnedPostgres> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-owned-pg-'));
  const dataDir = path.join(root, 'data');
  const logFile = path.join(root, 'server.log');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) await run('chown', ['postgres:', root]);
  const as = (file: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', file, ...args]) : run(file, args));

  await as(path.join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const port = await freePort();
  const options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  let running = false;
  const start = async () => {
    await as(path.join(bin, 'pg_ctl'), ['-D', dataDir, '-o', options, '-l', logFile, '-w', '-t', '60', 'start']);
    running = true;
  };
  const stop = async (mode: 'immediate' | 'fast' = 'fast') => {
    await as(path.join(bin, 'pg_ctl'), ['-D', dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
    running = false;
  };
  await start();
  t.teardown(async () => {
    if (running) await stop('immediate').catch(() => {});
    await fs.rm(root, { recursive: true, force: true });
  });
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, port, stop, start };
}
