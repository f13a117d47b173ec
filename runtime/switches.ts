import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Clock, Timer } from './clock.ts';
import type { Logger } from './logger.ts';
import type { Database } from '../persistence/database.ts';
import { readSwitch, writeSwitch, type SwitchRow } from '../persistence/stores/switches.ts';

/**
 * Operator switches (docs/operations.md, Emergency stop). The truth is a row of `service_switches`; every
 * node reads it at start and then every few seconds, and answers from memory in between, so checking
 * the switch costs nothing on the request path. The ops command line (app/ops.ts) writes the row.
 *
 * PGlite is a single-process database: while a server holds a PGlite data directory nobody else may
 * open it. There the command line hands its command to the server through files in `<DATA_DIR>/ops`
 * (the mailbox), and the server, the only one that can, writes the row on its next poll.
 */

export const GENERATION_PAUSED = 'generation_paused';
export const DEFAULT_SWITCH_POLL_MS = 2_000;

export interface PauseState {
  paused: boolean;
  /** The operator's reason, while paused. */
  reason: string | null;
  /** ISO 8601: when the pause began, while paused. */
  since: string | null;
}

export const NOT_PAUSED: PauseState = Object.freeze({ paused: false, reason: null, since: null });

export const MAX_REASON_LENGTH = 500;

function toPause(row: SwitchRow | undefined): PauseState {
  if (!row?.enabled) return NOT_PAUSED;
  return { paused: true, reason: row.reason, since: new Date(row.changed_at).toISOString() };
}

/** The generation_paused switch as stored; no row means not paused. */
export async function readGenerationPaused(db: Database): Promise<PauseState> {
  return toPause(await readSwitch(db, GENERATION_PAUSED));
}

/**
 * Sets the generation_paused switch. Pausing again while paused keeps the original `since` (and takes
 * the new reason); resuming forgets the reason.
 */
export async function writeGenerationPaused(db: Database, paused: boolean, reason: string | null, now: number): Promise<PauseState> {
  return toPause(await writeSwitch(db, GENERATION_PAUSED, paused, paused ? cleanReason(reason) : null, new Date(now)));
}

function cleanReason(reason: string | null): string | null {
  const text = reason?.trim();
  return text ? text.slice(0, MAX_REASON_LENGTH) : null;
}

/** A command handed to a running server through the mailbox. */
export type OpsCommand = { command: 'pause'; reason: string | null } | { command: 'resume' } | { command: 'status' };

export type OpsAnswer = { ok: true; state: PauseState } | { ok: false; error: string };

/** Where a server on a PGlite data directory takes commands; see the module comment. */
export function mailboxPaths(dir: string) {
  return { dir, requests: path.join(dir, 'requests'), answers: path.join(dir, 'answers'), holder: path.join(dir, 'server.pid') };
}

export interface ServiceSwitchesOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  pollMs?: number;
  /** `<DATA_DIR>/ops` when the database is PGlite on disk; undefined otherwise. */
  mailboxDir?: string;
}

/** The switches as this node knows them, refreshed from the database every `pollMs`. */
export class ServiceSwitches {
  private pause: PauseState = NOT_PAUSED;
  private timer: Timer | undefined;
  private stopped = false;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly listeners = new Set<(state: PauseState) => void>();
  private readonly pollMs: number;

  constructor(private readonly options: ServiceSwitchesOptions) {
    this.pollMs = options.pollMs ?? DEFAULT_SWITCH_POLL_MS;
  }

  /** Reads the switches once and starts polling. A failed read is logged and retried at the next poll. */
  async start(): Promise<void> {
    const mailbox = this.options.mailboxDir ? mailboxPaths(this.options.mailboxDir) : undefined;
    if (mailbox) {
      try {
        await fs.mkdir(mailbox.requests, { recursive: true });
        await fs.mkdir(mailbox.answers, { recursive: true });
        await fs.writeFile(mailbox.holder, `${process.pid}\n`);
      } catch (error) {
        this.options.logger.error({ err: error, dir: mailbox.dir }, 'switches: cannot open the ops mailbox; the ops command cannot reach this server');
      }
    }
    await this.refresh();
    this.schedule();
  }

  /** Whether generation is paused platform-wide, as of the last poll; synchronous and free. */
  generationPaused(): PauseState {
    return this.pause;
  }

  /** Called with the new state whenever it changes (e.g. to release queued jobs on resume). */
  onChange(listener: (state: PauseState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Writes the switch (tests, and the mailbox) and takes the new state at once. */
  setGenerationPaused(paused: boolean, reason: string | null = null): Promise<PauseState> {
    return this.serialised(async () => {
      const state = await writeGenerationPaused(this.options.db, paused, reason, this.options.clock.now());
      this.apply(state);
      return state;
    });
  }

  /** Takes mailbox commands, then reads the row; what the poll does, callable at any time. */
  refresh(): Promise<PauseState> {
    return this.serialised(async () => {
      try {
        await this.takeMailbox();
        this.apply(await readGenerationPaused(this.options.db));
      } catch (error) {
        if (!this.stopped) this.options.logger.warn({ err: error }, 'switches: refresh failed; keeping the last known state');
      }
      return this.pause;
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
    await this.chain.catch(() => undefined);
    const mailbox = this.options.mailboxDir ? mailboxPaths(this.options.mailboxDir) : undefined;
    if (mailbox) {
      // Only our own claim: another server may have taken the directory since.
      const holder = await fs.readFile(mailbox.holder, 'utf8').catch(() => '');
      if (holder.trim() === String(process.pid)) await fs.rm(mailbox.holder, { force: true });
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.options.clock.setTimer(() => {
      this.timer = undefined;
      void this.refresh().finally(() => this.schedule());
    }, this.pollMs);
  }

  /** One refresh or write at a time, so a slow read never overwrites a newer write. */
  private serialised<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private apply(state: PauseState): void {
    const before = this.pause;
    this.pause = state;
    if (before.paused === state.paused && before.reason === state.reason && before.since === state.since) return;
    if (state.paused) this.options.logger.warn({ reason: state.reason, since: state.since }, 'generation is paused platform-wide');
    else if (before.paused) this.options.logger.warn('generation is resumed');
    for (const listener of [...this.listeners]) {
      try {
        listener(state);
      } catch (error) {
        this.options.logger.error({ err: error }, 'switches: a change listener failed');
      }
    }
  }

  /** Applies the commands the ops command line left in the mailbox, oldest first, and answers each. */
  private async takeMailbox(): Promise<void> {
    if (!this.options.mailboxDir) return;
    const mailbox = mailboxPaths(this.options.mailboxDir);
    let names: string[];
    try {
      names = (await fs.readdir(mailbox.requests)).filter((name) => name.endsWith('.json')).sort();
    } catch {
      return;
    }
    for (const name of names) {
      const file = path.join(mailbox.requests, name);
      let answer: OpsAnswer;
      try {
        const command = parseCommand(JSON.parse(await fs.readFile(file, 'utf8')));
        answer = { ok: true, state: await this.execute(command) };
        if (command.command !== 'status') this.options.logger.info({ command: command.command }, 'switches: ops command applied');
      } catch (error) {
        answer = { ok: false, error: (error as Error).message };
      }
      await writeAtomically(path.join(mailbox.answers, name), JSON.stringify(answer));
      await fs.rm(file, { force: true });
    }
  }

  private async execute(command: OpsCommand): Promise<PauseState> {
    const now = this.options.clock.now();
    switch (command.command) {
      case 'pause': {
        const state = await writeGenerationPaused(this.options.db, true, command.reason, now);
        this.apply(state);
        return state;
      }
      case 'resume': {
        const state = await writeGenerationPaused(this.options.db, false, null, now);
        this.apply(state);
        return state;
      }
      case 'status':
        return readGenerationPaused(this.options.db);
    }
  }
}

export function parseCommand(value: unknown): OpsCommand {
  const command = (value as { command?: unknown } | null)?.command;
  if (command === 'pause') {
    const reason = (value as { reason?: unknown }).reason;
    return { command, reason: typeof reason === 'string' ? reason : null };
  }
  if (command === 'resume' || command === 'status') return { command };
  throw new Error(`unknown ops command ${JSON.stringify(command)}`);
}

/** Written under a temporary name and renamed, so a reader never sees half a file. */
export async function writeAtomically(file: string, text: string): Promise<void> {
  const temporary = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  await fs.writeFile(temporary, text);
  await fs.rename(temporary, file);
}
