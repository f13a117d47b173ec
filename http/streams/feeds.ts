import { ApiError } from '../errors.ts';
import type { Principal } from '../route.ts';
import type { Services } from '../services.ts';
import { eventIdOf, isLiveOutput, WINDOW_EVENTS, type LiveEvent, type LiveOutput } from '../../runtime/live-events.ts';
import { findGeneration, readGenerationAfresh, type GenerationRow } from '../../persistence/stores/generations/reads.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { canRead, readWorkspace } from '../routes/generations/access.ts';
import { toGenerationDetailOut } from '../routes/generations/shape.ts';
import type { Frame, FrameSink } from './hub.ts';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

/**
 * Last-Event-ID of a generation stream: a timeline index (`3`), or after a piece of the answer, the index of
 * the last transition sent and the piece's (`3.41`). Anything else is no id: the client gets the state.
 */
export function generationEventIdOf(value: string | undefined): { seq: number; output: number } | undefined {
  const match = value === undefined ? null : /^(\d{1,6})(?:\.(\d{1,9}))?$/.exec(value.trim());
  if (!match) return undefined;
  return { seq: Number(match[1]), output: match[2] === undefined ? -1 : Number(match[2]) };
}

/**
 * The events of one generation (docs/streaming.md): numbered by their index in its timeline, so that a
 * client resumes with Last-Event-ID on any node and after any restart, from the stored timeline.
 *
 * Opened in two steps so that every refusal is an ordinary error answer: open() checks the caller and
 * starts listening (before the row is read again, so that no transition falls between the read and the
 * listening), attach() then writes to the response.
 */
export class GenerationFeed {
  private buffered: LiveEvent[] | undefined = [];
  private unlisten: (() => void) | undefined;
  private sink: FrameSink | undefined;
  private lastSent = -1;
  /** The index of the last piece of the answer sent (`output` events). */
  private lastOutput = -1;
  private done = false;

  private constructor(
    private readonly services: Services,
    private row: GenerationRow,
  ) {}

  /** The generation as the caller may see it; another workspace's answers 404, as a missing one (getGeneration's rules). */
  static async open(services: Services, auth: Principal | undefined, generationId: string, workspaceId: string | undefined): Promise<GenerationFeed> {
    if (auth?.kind === 'key' && workspaceId !== undefined && workspaceId !== auth.workspaceId) {
      throw new ApiError('forbidden', 'This API key belongs to another workspace.');
    }
    const unit = openUnit(services.db);
    const row = await findGeneration(unit, generationId);
    const visible = row !== null && (workspaceId === undefined || workspaceId === row.workspaceId) && (await canRead(unit, auth, row.workspaceId));
    if (!row || !visible) throw new ApiError('not_found', `No generation ${generationId}.`);
    const feed = new GenerationFeed(services, row);
    if (!TERMINAL.has(row.status)) {
      feed.unlisten = services.live.listen(row.workspaceId, (event) => feed.onEvent(event));
      // Read again now that transitions are heard: one committed in between is in the row or heard, or both.
      const fresh = await readGenerationAfresh(openUnit(services.db), generationId);
      if (fresh) feed.row = fresh;
    }
    return feed;
  }

  get finished(): boolean {
    return TERMINAL.has(this.row.status);
  }

  /** The index of the generation's last event so far. */
  get lastSeq(): number {
    return this.row.timeline.length - 1;
  }

  /** Stops listening without writing (the request was refused after open). */
  cancel(): void {
    this.stop();
  }

  /**
   * Writes the state (or, after `lastSeq`, what the client missed), then each transition as it commits,
   * then `end` after the terminal one. `lastSeq` out of range is ignored: the client gets the state.
   */
  attach(sink: FrameSink, lastSeq: number | undefined, lastOutput = -1): void {
    this.sink = sink;
    sink.onClose(() => this.stop());
    const current = this.lastSeq;
    const detail = toGenerationDetailOut(this.row) as unknown as Record<string, unknown>;
    const resumed = !(lastSeq === undefined || lastSeq < 0 || lastSeq > current);
    if (!resumed) {
      sink.send({ event: 'state', id: String(current), data: detail });
    } else {
      for (let seq = lastSeq + 1; seq <= current; seq++) sink.send(this.transitionFrame(seq, this.row.timeline[seq]!, detail));
    }
    this.lastSent = current;
    if (this.finished) return this.finish(this.row.status);
    // The pieces of the answer streamed so far that this node kept (all of them, or those after the client's last).
    this.lastOutput = resumed ? lastOutput : -1;
    for (const piece of this.services.live.outputsOf(this.row.id, this.lastOutput)) this.sendOutput(piece);
    const buffered = this.buffered ?? [];
    this.buffered = undefined;
    for (const event of buffered) this.onEvent(event);
  }

  private onEvent(event: LiveEvent): void {
    if (event.generationId !== this.row.id || this.done) return;
    if (this.buffered) {
      this.buffered.push(event);
      return;
    }
    if (isLiveOutput(event)) return this.sendOutput(event);
    const sink = this.sink!;
    if (event.seq <= this.lastSent) return;
    // Transitions missed in between (a publication lost on the way) are in the generation's timeline.
    const timeline = (event.generation.timeline ?? []) as GenerationRow['timeline'];
    for (let seq = this.lastSent + 1; seq < event.seq; seq++) {
      const entry = timeline[seq];
      if (entry) sink.send(this.transitionFrame(seq, entry, event.generation));
    }
    sink.send(this.transitionFrame(event.seq, event, event.generation));
    this.lastSent = event.seq;
    if (event.terminal) this.finish(event.status);
  }

  /** A piece of the answer: its id is `<last transition sent>.<piece index>`, so Last-Event-ID resumes after it. */
  private sendOutput(piece: Pick<LiveOutput, 'index' | 'delta'>): void {
    if (piece.index <= this.lastOutput) return;
    this.lastOutput = piece.index;
    this.sink!.send({ event: 'output', id: `${this.lastSent}.${piece.index}`, data: { generationId: this.row.id, index: piece.index, delta: piece.delta } });
  }

  private transitionFrame(seq: number, entry: { status: string; at: string; detail?: string }, generation: Record<string, unknown>): Frame {
    return {
      event: 'transition',
      id: String(seq),
      data: {
        generationId: this.row.id,
        seq,
        status: entry.status,
        at: entry.at,
        ...(entry.detail !== undefined ? { detail: entry.detail } : {}),
        generation,
      },
    };
  }

  private finish(status: string): void {
    this.done = true;
    this.stop();
    this.sink?.end({ event: 'end', data: { generationId: this.row.id, status } });
  }

  private stop(): void {
    this.unlisten?.();
    this.unlisten = undefined;
  }
}

export interface WorkspaceFilter {
  modes?: Set<string>;
  statuses?: Set<string>;
  project?: string;
}

/** Parses a comma-separated list query value (`mode=text_to_image,image_to_image`). */
export function listOf(value: string | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  return new Set(
    value
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part !== ''),
  );
}

/**
 * Every transition of one workspace's generations, filtered. Event ids are `<generationId>.<seq>`; a client
 * resumes within this node's window (the last WINDOW_EVENTS events of the workspace, kept while it is
 * watched and WATCH_LINGER_MS after); an id outside it gets a `reset` event: read the list again.
 */
export class WorkspaceFeed {
  private unlisten: (() => void) | undefined;

  private constructor(
    private readonly services: Services,
    readonly workspaceId: string,
    private readonly filter: WorkspaceFilter,
  ) {}

  static async open(services: Services, auth: Principal | undefined, workspaceId: string | undefined, filter: WorkspaceFilter): Promise<WorkspaceFeed> {
    const workspace = await readWorkspace(openUnit(services.db), auth, workspaceId);
    return new WorkspaceFeed(services, workspace.id, filter);
  }

  attach(sink: FrameSink, lastEventId: string | undefined): void {
    const live = this.services.live;
    const missed = lastEventId === undefined ? [] : live.since(this.workspaceId, lastEventId);
    sink.send({ event: 'ready', data: { workspaceId: this.workspaceId, window: WINDOW_EVENTS } });
    if (missed === undefined) {
      sink.send({
        event: 'reset',
        data: {
          workspaceId: this.workspaceId,
          message: `Event ${lastEventId} is no longer in this node's window: read the generations again (GET /v1/generations), then follow this stream.`,
        },
      });
    } else {
      for (const event of missed) this.deliver(sink, event);
    }
    // Synchronously after since(): no event falls between the window and the listening.
    this.unlisten = live.listen(this.workspaceId, (event) => this.deliver(sink, event));
    sink.onClose(() => this.stop());
  }

  private deliver(sink: FrameSink, event: LiveEvent): void {
    // The pieces of answers go to the streams of their generation only.
    if (isLiveOutput(event)) return;
    const { modes, statuses, project } = this.filter;
    if (modes && !modes.has(event.mode)) return;
    if (statuses && !statuses.has(event.status)) return;
    if (project !== undefined && event.project !== project) return;
    sink.send({
      event: 'transition',
      id: eventIdOf(event),
      data: {
        generationId: event.generationId,
        seq: event.seq,
        status: event.status,
        at: event.at,
        ...(event.detail !== undefined ? { detail: event.detail } : {}),
        mode: event.mode,
        project: event.project,
        generation: event.generation,
      },
    });
  }

  stop(): void {
    this.unlisten?.();
    this.unlisten = undefined;
  }
}
