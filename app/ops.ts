import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { loadConfigOrExit, type Config } from '../runtime/config.ts';
import {
  DEFAULT_SWITCH_POLL_MS,
  mailboxPaths,
  MAX_REASON_LENGTH,
  readGenerationPaused,
  writeAtomically,
  writeGenerationPaused,
  type OpsAnswer,
  type OpsCommand,
  type PauseState,
} from '../runtime/switches.ts';
import { openDatabase } from '../persistence/database.ts';
import { askReload, servicePaths, type ReloadAnswer } from '../runtime/service-pid.ts';

/**
 * The operator's command line (docs/operations.md, Emergency stop), on the service's own database configuration
 * (DATABASE_URL, DATA_DIR):
 *
 *   npm run ops -- pause "reason"   stop sending jobs to providers; POST /v1/generations answers 503 generation_paused
 *   npm run ops -- resume           back to normal
 *   npm run ops -- status           the switch as stored
 *   npm run ops -- reload           the running service on this machine reads its catalog file again (SIGHUP
 *                                   to the process its pid file names; docs/operations.md, Reload)
 *
 * Prints the resulting state as one JSON line on stdout. Every server applies it within its poll interval (2 s).
 * From the production build the same command runs dist/app/ops.js (package.json's ops script).
 */

const USAGE = 'usage: npm run ops -- pause "reason" | resume | status | reload   [--wait-ms N]';
/** How long to wait for a running PGlite server to take a mailbox command: several of its polls. */
const DEFAULT_WAIT_MS = 10 * DEFAULT_SWITCH_POLL_MS;

class UsageError extends Error {}

function parseArgs(argv: string[]): { command: OpsCommand | { command: 'reload' }; waitMs: number } {
  const args = [...argv];
  let waitMs = DEFAULT_WAIT_MS;
  const waitAt = args.indexOf('--wait-ms');
  if (waitAt >= 0) {
    const value = Number(args[waitAt + 1]);
    if (!Number.isInteger(value) || value < 1) throw new UsageError('--wait-ms takes a whole number of milliseconds');
    waitMs = value;
    args.splice(waitAt, 2);
  }
  const [verb, ...rest] = args;
  switch (verb) {
    case 'pause': {
      const reason = rest.join(' ').trim();
      if (!reason) throw new UsageError('pause needs a reason, e.g. npm run ops -- pause "provider outage"');
      if (reason.length > MAX_REASON_LENGTH) throw new UsageError(`the reason must be at most ${MAX_REASON_LENGTH} characters`);
      return { command: { command: 'pause', reason }, waitMs };
    }
    case 'resume':
    case 'status':
    case 'reload':
      if (rest.length > 0) throw new UsageError(`${verb} takes no arguments`);
      return { command: { command: verb }, waitMs };
    default:
      throw new UsageError(verb ? `unknown command "${verb}"` : 'a command is required');
  }
}

/** Runs one command and returns the switch state after it. */
export async function runOps(config: Config, command: OpsCommand, waitMs = DEFAULT_WAIT_MS, now: () => number = Date.now): Promise<PauseState> {
  if (config.databaseUrl === 'memory://') {
    throw new Error('DATABASE_URL=memory:// is a private in-process database; there is no stored switch to change');
  }
  const onDisk = !config.databaseUrl?.startsWith('postgres');
  if (onDisk) {
    const mailbox = mailboxPaths(path.join(config.dataDir, 'ops'));
    // A server holds this PGlite directory: opening it here too would corrupt it, so hand it the command.
    if (await holderAlive(mailbox.holder)) return viaMailbox(mailbox, command, waitMs);
  }
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: 1 });
  try {
    switch (command.command) {
      case 'pause':
        return await writeGenerationPaused(db, true, command.reason, now());
      case 'resume':
        return await writeGenerationPaused(db, false, null, now());
      case 'status':
        return await readGenerationPaused(db);
    }
  } finally {
    await db.close();
  }
}

async function holderAlive(holderFile: string): Promise<boolean> {
  const text = await fs.readFile(holderFile, 'utf8').catch(() => undefined);
  const pid = Number(text?.trim());
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function viaMailbox(mailbox: ReturnType<typeof mailboxPaths>, command: OpsCommand, waitMs: number): Promise<PauseState> {
  const name = `${Date.now().toString().padStart(15, '0')}-${randomBytes(6).toString('hex')}.json`;
  const request = path.join(mailbox.requests, name);
  const answerFile = path.join(mailbox.answers, name);
  await fs.mkdir(mailbox.requests, { recursive: true });
  await writeAtomically(request, JSON.stringify(command));
  const deadline = Date.now() + waitMs;
  for (;;) {
    const text = await fs.readFile(answerFile, 'utf8').catch(() => undefined);
    if (text !== undefined) {
      await fs.rm(answerFile, { force: true });
      const answer = JSON.parse(text) as OpsAnswer;
      if (!answer.ok) throw new Error(`the server refused the command: ${answer.error}`);
      return answer.state;
    }
    if (Date.now() >= deadline) {
      // Withdraw it, unless the server is taking it right now (then its answer is lost, not its effect).
      const withdrawn = await fs.rm(request).then(
        () => true,
        () => false,
      );
      throw new Error(
        withdrawn
          ? `the server holding ${path.dirname(mailbox.dir)} did not take the command within ${waitMs} ms; nothing was changed`
          : `the server took the command but did not answer within ${waitMs} ms; run "npm run ops -- status" to see the state`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function describe(state: PauseState): string {
  return state.paused
    ? `generation is PAUSED platform-wide since ${state.since}${state.reason ? `: ${state.reason}` : ''}`
    : 'generation is running normally (not paused)';
}

function describeReload({ pid, result }: ReloadAnswer): string {
  switch (result.outcome) {
    case 'applied':
      return `process ${pid} serves the catalog file's new version ${result.version}`;
    case 'unchanged':
      return result.problems
        ? `process ${pid}: the catalog file is the one it refused before; it still serves ${result.version}:\n  ${result.problems.join('\n  ')}`
        : `process ${pid}: the catalog file holds the catalog it serves (${result.version}); nothing changed`;
    case 'refused':
      return `process ${pid} refused the catalog file and still serves the catalog it had:\n  ${result.problems.join('\n  ')}`;
  }
}

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`${error.message}\n${USAGE}\n`);
    process.exit(64);
  }
  const config = loadConfigOrExit();
  const command = parsed.command;
  if (command.command === 'reload') {
    const answer = await askReload(servicePaths(config.dataDir, config.cluster?.nodeId), parsed.waitMs);
    process.stdout.write(`${JSON.stringify({ pid: answer.pid, ...answer.result })}\n`);
    process.stderr.write(`${describeReload(answer)}\n`);
    // A file refused (now or, unchanged since, before): the catalog served is the old one.
    process.exit(answer.result.outcome === 'refused' || (answer.result.outcome === 'unchanged' && answer.result.problems) ? 65 : 0);
  }
  const state = await runOps(config, command, parsed.waitMs);
  process.stdout.write(`${JSON.stringify(state)}\n`);
  process.stderr.write(`${describe(state)}${parsed.command.command === 'status' ? '' : `; servers apply it within ${DEFAULT_SWITCH_POLL_MS / 1000} s`}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  main().catch((error: unknown) => {
    process.stderr.write(`ops: ${(error as Error).message}\n`);
    process.exit(1);
  });
}
