import type { Agent } from 'undici';
import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage, type AdapterContext, type AdapterJob, type Report } from '../adapter.ts';
import type { OutputFile } from '../provider.ts';
import { ComfyuiFailure, type ComfyuiClient } from './client.ts';
import type { OutputRef } from './history.ts';
import { mediaTypeOf, typedOutput } from './media.ts';
import type { ComfyuiSettings } from './settings.ts';
import { openProgressSocket, type ProgressSocket, type SocketMessage } from './socket.ts';

/** Step progress reaches the job's timeline at most this often (a sampler sends one message per step). */
export const PROGRESS_INTERVAL_MS = 1_000;
const MAX_RECONNECT_MS = 30_000;

export interface FollowerDeps {
  client: ComfyuiClient;
  context: AdapterContext;
  settings: ComfyuiSettings;
  socketAgent: Agent;
  outputNodes?: readonly string[];
  /** Stops the prompt at the server (the deadline passed); never throws. */
  stopAtServer(promptId: string): Promise<void>;
}

/**
 * Follows one prompt to its end. `/history/{prompt_id}` decides the outcome; it is read when the socket
 * says the prompt is over (`executing` with node null, or execution_success/error/interrupted), when the
 * socket closes, and at every poll (context.pollIntervalMs), since the socket's messages reach only the
 * submitting client id and sockets drop. While the history has nothing, `/queue` tells queued from
 * running from gone (a server restarted since: its queue and history live in memory). One terminal
 * update at most; nothing after it.
 */
export class PromptFollower {
  private done = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private socket: ProgressSocket | undefined;
  private reconnects = 0;
  private checking = false;
  private checkAgain = false;
  private runningReported = false;
  private lastProgressAt = Number.NEGATIVE_INFINITY;
  private lastQueueDetail: string | undefined;
  private lastFailure: ProviderFailure | undefined;
  private notBefore = 0;

  constructor(
    public promptId: string,
    readonly clientId: string,
    private readonly job: AdapterJob,
    private readonly report: Report,
    private readonly deps: FollowerDeps,
    private readonly onEnd: () => void,
  ) {}

  /** Opens the socket before the prompt is queued, so none of its messages is missed. */
  openSocket(): void {
    if (this.done) return;
    this.socket = openProgressSocket(
      { baseUrl: this.deps.settings.baseUrl, clientId: this.clientId, apiKey: this.deps.settings.apiKey, dispatcher: this.deps.socketAgent },
      (message) => this.onMessage(message),
      () => this.onSocketClosed(),
    );
  }

  /** Starts polling; `now` reads the history at once (a resume), otherwise after one interval. */
  start(now: boolean): void {
    if (now) void this.check();
    this.schedulePoll();
  }

  /** Stops following without reporting (a cancel, or the service stopping). */
  stop(): void {
    this.done = true;
    this.release();
  }

  private release(): void {
    clearTimeout(this.pollTimer);
    clearTimeout(this.reconnectTimer);
    this.socket?.close();
    this.socket = undefined;
  }

  private schedulePoll(): void {
    if (this.done) return;
    const wait = Math.max(this.deps.context.pollIntervalMs, this.notBefore - this.deps.context.now());
    this.pollTimer = setTimeout(() => {
      void this.check().finally(() => this.schedulePoll());
    }, wait);
  }

  private onMessage(message: SocketMessage): void {
    if (this.done) return;
    this.reconnects = 0;
    if (message.data.prompt_id !== this.promptId) return; // status broadcasts, or another prompt of this client id
    switch (message.type) {
      case 'execution_start':
        this.markRunning();
        break;
      case 'executing':
        if (message.data.node === null) void this.check();
        else this.markRunning();
        break;
      case 'progress': {
        this.markRunning();
        const { value, max, node } = message.data;
        if (typeof value === 'number' && typeof max === 'number') {
          this.progress(`Step ${value} of ${max}${typeof node === 'string' ? ` (node ${node})` : ''}.`, true);
        }
        break;
      }
      case 'execution_success':
      case 'execution_error':
      case 'execution_interrupted':
        void this.check();
        break;
      default:
        break; // executed, execution_cached, progress_state: the history holds what matters of them
    }
  }

  private onSocketClosed(): void {
    this.socket = undefined;
    if (this.done) return;
    void this.check();
    const wait = Math.min(this.deps.context.pollIntervalMs * 2 ** this.reconnects, MAX_RECONNECT_MS);
    this.reconnects += 1;
    this.reconnectTimer = setTimeout(() => this.openSocket(), wait);
  }

  /** One reading of where the prompt is; single-flight, a request made meanwhile runs once after. */
  private async check(): Promise<void> {
    if (this.done) return;
    if (this.checking) {
      this.checkAgain = true;
      return;
    }
    this.checking = true;
    try {
      if (this.deps.context.now() >= this.job.deadline) {
        await this.deps.stopAtServer(this.promptId);
        const last = this.lastFailure;
        if (last && (last.code === PROVIDER_ERROR_CODES.unavailable || last.code === PROVIDER_ERROR_CODES.error))
          this.fail(last.code, `${last.message} (until the job's deadline)`);
        else this.fail(PROVIDER_ERROR_CODES.timeout, "The prompt did not finish by the job's deadline; it was stopped at ComfyUI.");
        return;
      }
      await this.read();
      this.lastFailure = undefined;
    } catch (error) {
      this.onCheckFailed(error);
    } finally {
      this.checking = false;
      if (this.checkAgain && !this.done) {
        this.checkAgain = false;
        void this.check();
      }
    }
  }

  private async read(): Promise<void> {
    const { client, outputNodes } = this.deps;
    let reading = await client.history(this.promptId, outputNodes);
    if (reading.state === 'unfinished') {
      const queue = await client.queue();
      if (queue.running.includes(this.promptId)) {
        this.markRunning();
        return;
      }
      const position = queue.pending.indexOf(this.promptId);
      if (position >= 0) {
        const detail = position === 0 ? 'Queued at ComfyUI, next to run.' : `Queued at ComfyUI, ${position} ahead.`;
        if (detail !== this.lastQueueDetail) {
          this.lastQueueDetail = detail;
          this.progress(detail, false);
        }
        return;
      }
      // Neither queued nor running: it ended between the two reads, or the server no longer knows it.
      reading = await client.history(this.promptId, outputNodes);
      if (reading.state === 'unfinished') {
        this.fail(
          PROVIDER_ERROR_CODES.error,
          `ComfyUI no longer knows prompt ${this.promptId}: it is not queued, not running and not in its history (the server restarted or its history was cleared).`,
        );
        return;
      }
    }
    if (this.done) return;
    if (reading.state === 'failed') {
      this.fail(reading.code, reading.message);
      return;
    }
    const files = await this.fetchOutputs(reading.files);
    if (files) this.succeed(files);
  }

  private async fetchOutputs(refs: OutputRef[]): Promise<OutputFile[] | undefined> {
    const mediaType = mediaTypeOf(this.job.mode)!;
    const files: OutputFile[] = [];
    const refused: string[] = [];
    for (const ref of refs) {
      const bytes = await this.deps.client.view(ref);
      if (this.done) return undefined;
      const file = typedOutput(bytes, mediaType);
      if (file) files.push(file);
      else refused.push(`${ref.filename} (node ${ref.node})`);
    }
    // Named output nodes must all give the mode's kind of file; otherwise other saved files are left aside.
    if (refused.length > 0 && (this.deps.outputNodes || files.length === 0)) {
      this.fail(
        PROVIDER_ERROR_CODES.badResponse,
        upstreamMessage(`ComfyUI's output is not ${mediaType === 'image' ? 'an image' : mediaType}: ${refused.join(', ')}.`),
      );
      return undefined;
    }
    return files;
  }

  private onCheckFailed(error: unknown): void {
    const failure =
      error instanceof ProviderFailure
        ? error
        : new ProviderFailure(PROVIDER_ERROR_CODES.error, upstreamMessage(`Following the prompt failed: ${(error as Error).message ?? String(error)}`));
    const code = failure.code;
    if (code === PROVIDER_ERROR_CODES.rateLimited) {
      const wait = (failure instanceof ComfyuiFailure ? failure.retryAfterMs : undefined) ?? this.deps.context.pollIntervalMs;
      if (this.deps.context.now() + wait >= this.job.deadline) {
        this.fail(code, `${failure.message} The wait it asks for passes the job's deadline.`);
        return;
      }
      this.notBefore = this.deps.context.now() + wait;
      this.progress(`ComfyUI is rate limiting (429); waiting ${Math.ceil(wait / 1000)} s.`, false);
      return;
    }
    // Lasting failures end the job now; a server down, slow or failing for a moment is waited out until the deadline.
    if (
      code === PROVIDER_ERROR_CODES.authFailed ||
      code === PROVIDER_ERROR_CODES.badResponse ||
      code === PROVIDER_ERROR_CODES.outputFetch ||
      code === PROVIDER_ERROR_CODES.inputRejected
    ) {
      this.fail(code, failure.message);
      return;
    }
    this.lastFailure = failure;
    this.progress(`ComfyUI could not be read (${failure.message}); retrying.`, true);
  }

  private markRunning(): void {
    if (this.runningReported || this.done) return;
    this.runningReported = true;
    this.report({ type: 'running' });
  }

  private progress(detail: string, throttled: boolean): void {
    if (this.done) return;
    const now = this.deps.context.now();
    if (throttled && now - this.lastProgressAt < PROGRESS_INTERVAL_MS) return;
    this.lastProgressAt = now;
    this.report({ type: 'progress', detail });
  }

  private succeed(files: OutputFile[]): void {
    if (this.done) return;
    this.markRunning();
    this.done = true;
    this.release();
    this.report({ type: 'succeeded', files });
    this.onEnd();
  }

  private fail(errorCode: ProviderFailure['code'], errorMessage: string): void {
    if (this.done) return;
    this.done = true;
    this.release();
    this.report({ type: 'failed', errorCode, errorMessage });
    this.onEnd();
  }
}
