import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ReloadOutcome } from './catalog-source.ts';

/**
 * How the operator's command reaches a running service on this machine (docs/operations.md, Reload): the
 * service writes its process id to `<DATA_DIR>/run/service.pid` (`service-<node id>.pid` in cluster mode, so
 * nodes sharing a DATA_DIR keep theirs apart) and, after each SIGHUP, the outcome of the catalog reload it
 * made to `….reload.json`, numbered. `npm run ops -- reload` reads the pid, sends SIGHUP to that process
 * (Node itself, not npm, whose SIGHUP would end npm and leave Node running) and waits for the next answer.
 */
export interface ServicePaths {
  dir: string;
  pid: string;
  reload: string;
}

/** An answer to a SIGHUP: the reload's outcome, numbered within the process that made it. */
export interface ReloadAnswer {
  pid: number;
  seq: number;
  at: string;
  result: ReloadOutcome;
}

export function servicePaths(dataDir: string, nodeId?: string): ServicePaths {
  const dir = path.join(dataDir, 'run');
  const name = nodeId ? `service-${nodeId.replace(/[^A-Za-z0-9._-]/g, '_')}` : 'service';
  return { dir, pid: path.join(dir, `${name}.pid`), reload: path.join(dir, `${name}.reload.json`) };
}

/** Writes this process's id to the pid file; the function returned removes it, if it is still ours. */
export async function claimPidFile(paths: ServicePaths): Promise<() => Promise<void>> {
  await fs.mkdir(paths.dir, { recursive: true });
  await writeAtomically(paths.pid, `${process.pid}\n`);
  return async () => {
    const text = await fs.readFile(paths.pid, 'utf8').catch(() => '');
    if (text.trim() === String(process.pid)) await fs.rm(paths.pid, { force: true });
  };
}

/** Numbers this process's answers to SIGHUP and writes each one where the ops command waits for it. */
export function reloadAnswers(paths: ServicePaths): (result: ReloadOutcome) => Promise<void> {
  let seq = 0;
  return async (result) => {
    seq++;
    const answer: ReloadAnswer = { pid: process.pid, seq, at: new Date().toISOString(), result };
    await writeAtomically(paths.reload, JSON.stringify(answer));
  };
}

async function writeAtomically(file: string, text: string): Promise<void> {
  const staged = `${file}.${process.pid}.tmp`;
  await fs.writeFile(staged, text);
  await fs.rename(staged, file);
}

export class ReloadError extends Error {}

/** The process the pid file names, when it is alive and runs the service (on Linux, its command line says so). */
export function runningService(paths: ServicePaths): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(paths.pid, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return undefined;
  }
  // A pid file left by a killed service may name a pid since given to another program, which SIGHUP could end.
  let commandLine: string | undefined;
  try {
    commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    commandLine = undefined; // no /proc (macOS): the pid is trusted
  }
  if (commandLine !== undefined && !/app[/\\]main\.(?:js|ts)\b/.test(commandLine)) return undefined;
  return pid;
}

/** Sends SIGHUP to the running service and waits up to `waitMs` for its answer. */
export async function askReload(paths: ServicePaths, waitMs: number): Promise<ReloadAnswer> {
  const pid = runningService(paths);
  if (pid === undefined) {
    throw new ReloadError(
      `no running service found through ${paths.pid} (is DATA_DIR the service's, and CLUSTER_NODE_ID its node id?); send SIGHUP to the node process yourself`,
    );
  }
  const before = await readAnswer(paths);
  const seen = (answer: ReloadAnswer | undefined) => answer !== undefined && answer.pid === pid && (before?.pid !== pid || answer.seq > before.seq);
  process.kill(pid, 'SIGHUP');
  const deadline = Date.now() + waitMs;
  for (;;) {
    const answer = await readAnswer(paths);
    if (seen(answer)) return answer!;
    if (Date.now() >= deadline) throw new ReloadError(`process ${pid} got SIGHUP but wrote no answer within ${waitMs} ms; see its log ("catalog reload")`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function readAnswer(paths: ServicePaths): Promise<ReloadAnswer | undefined> {
  const text = await fs.readFile(paths.reload, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as ReloadAnswer;
  } catch {
    return undefined;
  }
}
