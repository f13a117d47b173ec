import { randomUUID } from 'node:crypto';
import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage, type AdapterContext, type AdapterJob, type ProviderAdapter } from '../adapter.ts';
import { type CallContext, clockOf, type Followed, followedAdapter, type Look, type ProtocolModule, type Watch } from '../follower.ts';
import type { OutputFile } from '../provider.ts';
import { ComfyuiClient, ComfyuiFailure } from './client.ts';
import type { ComfyuiDeploymentTarget } from './deployment.ts';
import type { OutputRef } from './history.ts';
import { mediaTypeOf, typedOutput, uploadName } from './media.ts';
import type { ComfyuiSettings } from './settings.ts';
import { openProgressSocket, type ProgressSocket, socketAgent, type SocketMessage } from './socket.ts';
import { fillWorkflow, loadWorkflowTemplate, placeholderValues } from './workflow.ts';

/** Step progress reaches the job's timeline at most this often (a sampler sends one message per step). */
export const PROGRESS_INTERVAL_MS = 1_000;
/** Messages a socket opened by submit holds until the follower takes it (a prompt's first steps). */
const MAX_HELD_MESSAGES = 1_000;

/**
 * A ComfyUI server running one deployment's workflow: a protocol module on the job follower
 * (providers/follower.ts), which owns the polls, the socket's lifetime, the deadline and cancels.
 *
 * submit uploads the job's input files (`POST /upload/image`), fills the workflow template and queues it
 * (`POST /prompt` with a client_id of the job's own). The provider job id is `<prompt_id>:<client_id>`: the
 * client id lets a resume reopen the socket the prompt's messages go to. ComfyUI sends no webhooks, so there
 * is no verifyEvent: its news comes over its socket (`/ws?clientId=`, ./socket.ts), the follower's `watch`,
 * which submit opens before the prompt is queued so that none of its messages is missed. The socket only
 * says the prompt runs, its sampler steps, and when to look: `/history/{prompt_id}` (`get`, also the backstop
 * poll) decides the outcome, since the socket's messages reach only the submitting client id and sockets drop.
 * While the history has nothing, `/queue` tells queued from running from gone (a server restarted since: its
 * queue and history live in memory). Outputs come through `/view`. A cancel takes the prompt off the queue
 * (`POST /queue` delete) or interrupts it when it is the one running (`POST /interrupt`).
 *
 * Throws at creation when the deployment's workflow is unreadable or names an unknown placeholder.
 */
export interface ComfyuiNotes {
  promptId: string;
  clientId: string;
  /** When a line last reached the timeline (step lines and retries are throttled). */
  lastProgressAt: number;
  lastQueueDetail?: string;
  /** The failure of the last reading, when it failed in a way waited out (told at the deadline). */
  lastFailure?: ProviderFailure;
  /** A 429's Retry-After: no backstop look before then. */
  notBefore: number;
  /** The socket submit opened before queueing the prompt, until the follower's watch takes it. */
  early?: Channel;
}

/** A progress socket whose messages are held until someone listens. */
interface Channel extends Watch {
  listen(onMessage: (message: SocketMessage) => void): void;
}

export function createComfyuiAdapter(
  settings: ComfyuiSettings,
  deployment: { id: string; target: ComfyuiDeploymentTarget },
  context: AdapterContext,
): ProviderAdapter {
  return followedAdapter(comfyuiProtocol(settings, deployment, context), context);
}

export function comfyuiProtocol(
  settings: ComfyuiSettings,
  deployment: { id: string; target: ComfyuiDeploymentTarget },
  context: AdapterContext,
): ProtocolModule<ComfyuiNotes> {
  const { template, problems } = loadWorkflowTemplate(deployment.target);
  if (!template) throw new Error(`ComfyUI deployment ${deployment.id}: ${problems.join('; ')}`);
  const client = new ComfyuiClient(settings, context);
  const agent = socketAgent(Math.min(context.requestTimeoutMs, 10_000), context.maxResponseBytes);
  const clock = clockOf(context);
  const outputNodes = deployment.target.outputNodes;
  const channels = new Set<Channel>();
  let closed = false;
  type Job = Followed<ComfyuiNotes>;

  const notesFor = (promptId: string, clientId: string): ComfyuiNotes => ({ promptId, clientId, lastProgressAt: Number.NEGATIVE_INFINITY, notBefore: 0 });
  const newClientId = () => randomUUID().replace(/-/g, '');
  const over = (code: ProviderFailure['code'], message: string): Look => ({ type: 'over', update: { type: 'failed', errorCode: code, errorMessage: message } });

  /** Opens the socket of a client id; what it says is held until `listen`. Closed with the module. */
  function openChannel(clientId: string): Channel {
    let onMessage: ((message: SocketMessage) => void) | undefined;
    const held: SocketMessage[] = [];
    let ended!: () => void;
    const closedPromise = new Promise<void>((resolve) => {
      ended = resolve;
    });
    let socket: ProgressSocket | undefined;
    const channel: Channel = {
      closed: closedPromise,
      close() {
        socket?.close();
        done();
      },
      listen(listener) {
        onMessage = listener;
        for (const message of held.splice(0)) listener(message);
      },
    };
    const done = () => {
      channels.delete(channel);
      ended();
    };
    if (closed) {
      done();
      return channel;
    }
    channels.add(channel);
    socket = openProgressSocket(
      { baseUrl: settings.baseUrl, clientId, apiKey: settings.apiKey, dispatcher: agent },
      (message) => {
        if (onMessage) onMessage(message);
        else if (held.length < MAX_HELD_MESSAGES) held.push(message);
      },
      done,
    );
    return channel;
  }

  /** A line for the timeline; a throttled one only when none came for PROGRESS_INTERVAL_MS. */
  function line(f: Job, detail: string, throttled: boolean): string[] {
    const now = clock.now();
    if (throttled && now - f.notes.lastProgressAt < PROGRESS_INTERVAL_MS) return [];
    f.notes.lastProgressAt = now;
    return [detail];
  }

  /** What one socket message says of the job. */
  function lookOfMessage(f: Job, message: SocketMessage): Look {
    // Status broadcasts, or another prompt of this client id: the socket works, nothing more.
    if (message.data.prompt_id !== f.notes.promptId) return { type: 'pending' };
    switch (message.type) {
      case 'execution_start':
        return { type: 'pending', running: true };
      case 'executing':
        return message.data.node === null ? { type: 'lookNow' } : { type: 'pending', running: true };
      case 'progress': {
        const { value, max, node } = message.data;
        const progress =
          typeof value === 'number' && typeof max === 'number'
            ? line(f, `Step ${value} of ${max}${typeof node === 'string' ? ` (node ${node})` : ''}.`, true)
            : [];
        return { type: 'pending', running: true, progress };
      }
      case 'execution_success':
      case 'execution_error':
      case 'execution_interrupted':
        return { type: 'lookNow' };
      default:
        return { type: 'pending' }; // executed, execution_cached, progress_state: the history holds what matters of them
    }
  }

  /** One reading of where the prompt is: its history, and while it has none, the queue. */
  async function read(f: Job): Promise<Look> {
    const { promptId } = f.notes;
    let reading = await client.history(promptId, outputNodes);
    if (reading.state === 'unfinished') {
      const queue = await client.queue();
      if (queue.running.includes(promptId)) return { type: 'pending', running: true };
      const position = queue.pending.indexOf(promptId);
      if (position >= 0) {
        const detail = position === 0 ? 'Queued at ComfyUI, next to run.' : `Queued at ComfyUI, ${position} ahead.`;
        if (detail === f.notes.lastQueueDetail) return { type: 'pending' };
        f.notes.lastQueueDetail = detail;
        return { type: 'pending', progress: line(f, detail, false) };
      }
      // Neither queued nor running: it ended between the two reads, or the server no longer knows it.
      reading = await client.history(promptId, outputNodes);
      if (reading.state === 'unfinished') {
        return over(
          PROVIDER_ERROR_CODES.error,
          `ComfyUI no longer knows prompt ${promptId}: it is not queued, not running and not in its history (the server restarted or its history was cleared).`,
        );
      }
    }
    if (reading.state === 'failed') return over(reading.code, reading.message);
    const files = reading.files;
    return { type: 'ending', settle: () => outputsOf(f, files) };
  }

  /** The output files, fetched through /view and typed from their bytes. */
  async function outputsOf(f: Job, refs: OutputRef[]): Promise<Look> {
    const mediaType = mediaTypeOf(f.job.mode)!;
    const files: OutputFile[] = [];
    const refused: string[] = [];
    try {
      for (const ref of refs) {
        const file = typedOutput(await client.view(ref), mediaType);
        if (file) files.push(file);
        else refused.push(`${ref.filename} (node ${ref.node})`);
      }
    } catch (error) {
      return failedReading(f, error);
    }
    // Named output nodes must all give the mode's kind of file; otherwise other saved files are left aside.
    if (refused.length > 0 && (outputNodes || files.length === 0)) {
      return over(
        PROVIDER_ERROR_CODES.badResponse,
        upstreamMessage(`ComfyUI's output is not ${mediaType === 'image' ? 'an image' : mediaType}: ${refused.join(', ')}.`),
      );
    }
    return { type: 'over', update: { type: 'succeeded', files } };
  }

  /** A reading that failed: lasting failures end the job; a server down, slow or failing for a moment is waited out until the deadline. */
  function failedReading(f: Job, error: unknown): Look {
    const failure =
      error instanceof ProviderFailure
        ? error
        : new ProviderFailure(PROVIDER_ERROR_CODES.error, upstreamMessage(`Following the prompt failed: ${(error as Error).message ?? String(error)}`));
    const code = failure.code;
    if (code === PROVIDER_ERROR_CODES.rateLimited) {
      const wait = (failure instanceof ComfyuiFailure ? failure.retryAfterMs : undefined) ?? context.pollIntervalMs;
      if (clock.now() + wait >= f.job.deadline) return over(code, `${failure.message} The wait it asks for passes the job's deadline.`);
      f.notes.notBefore = clock.now() + wait;
      return { type: 'pending', progress: line(f, `ComfyUI is rate limiting (429); waiting ${Math.ceil(wait / 1000)} s.`, false) };
    }
    if (
      code === PROVIDER_ERROR_CODES.authFailed ||
      code === PROVIDER_ERROR_CODES.badResponse ||
      code === PROVIDER_ERROR_CODES.outputFetch ||
      code === PROVIDER_ERROR_CODES.inputRejected
    ) {
      return over(code, failure.message);
    }
    f.notes.lastFailure = failure;
    return { type: 'pending', progress: line(f, `ComfyUI could not be read (${failure.message}); retrying.`, true) };
  }

  /** Takes the prompt off the queue, or interrupts it when it is the one running; never throws. */
  async function stopAtServer(promptId: string): Promise<void> {
    try {
      // A prompt deleted while pending may start in between: look again, up to three times.
      for (let round = 0; round < 3; round++) {
        const queue = await client.queue();
        if (queue.pending.includes(promptId)) {
          await client.deleteQueued(promptId);
          continue;
        }
        // /interrupt stops whatever runs (older servers ignore the prompt_id we send), so only when it is ours.
        if (queue.running.includes(promptId)) await client.interrupt(promptId);
        return;
      }
    } catch {
      // Cancelling is best effort: a server that cannot be reached runs the prompt to its end.
    }
  }

  return {
    kind: 'comfyui',
    maxConcurrentJobs: settings.maxConcurrentJobs,
    // The deadline's outcome is told once the prompt is off the queue or interrupted.
    cancelBeforeOverdue: true,
    // A success is told after running, even for a prompt no message or look saw run.
    runningBeforeSuccess: true,
    watchRetryMaxMs: 30_000,

    async submit(job: AdapterJob, on: CallContext) {
      if (!mediaTypeOf(job.mode))
        throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `A ComfyUI workflow makes files; mode ${job.mode} is not served.`);
      const onWait = (ms: number) => on.say(`ComfyUI is rate limiting (429); waiting ${Math.ceil(ms / 1000)} s.`);
      const waits = { sleep: on.wait, signal: on.signal };

      const files: Record<string, string> = {};
      const slots: Array<[string, { bytes: Buffer; contentType: string } | undefined]> = [
        ...job.inputs.images.map((file, index) => [index === 0 ? 'image' : `image${index + 1}`, file] as [string, typeof file]),
        ['mask', job.inputs.mask],
        ['video', job.inputs.videos[0]],
      ];
      for (const [slot, file] of slots) {
        // Only the files the workflow takes go up.
        if (!file || !template.placeholders.has(slot)) continue;
        files[slot] = await client.upload(file, uploadName(job.generationId, slot, file.contentType), job.deadline, onWait, waits);
      }

      const values = placeholderValues(template, { input: job.input, params: job.params, defaults: deployment.target.defaults, files });
      const workflow = fillWorkflow(template, values);
      const clientId = newClientId();
      const wanted = randomUUID();
      // Opened before the prompt is queued, so none of its messages is missed; the follower's watch takes it.
      const early = openChannel(clientId);
      let promptId: string;
      try {
        promptId = await client.queuePrompt(workflow, clientId, wanted, job.deadline, onWait, waits);
      } catch (error) {
        early.close();
        const code = (error as ProviderFailure).code;
        // An answer lost or garbled may hide a queued prompt: take it off (current servers kept our prompt_id).
        if (code === PROVIDER_ERROR_CODES.timeout || code === PROVIDER_ERROR_CODES.badResponse || code === PROVIDER_ERROR_CODES.unavailable)
          void stopAtServer(wanted);
        throw error;
      }
      return { providerJobId: `${promptId}:${clientId}`, notes: { ...notesFor(promptId, clientId), early } };
    },

    resume(providerJobId) {
      const { promptId, clientId } = parseJobId(providerJobId);
      if (!promptId) {
        return { failure: new ProviderFailure(PROVIDER_ERROR_CODES.error, `${JSON.stringify(providerJobId.slice(0, 100))} is not a ComfyUI job id.`) };
      }
      // A bare prompt id: a socket of its own (which hears nothing of the prompt), and the polls.
      return { notes: notesFor(promptId, clientId ?? newClientId()) };
    },

    watch(f, tell) {
      const channel = f.notes.early ?? openChannel(f.notes.clientId);
      f.notes.early = undefined;
      channel.listen((message) => tell(lookOfMessage(f, message)));
      return channel;
    },

    // At once after a resume (the prompt may have ended while nobody followed it); else every poll interval, or after a 429's wait.
    nextLookMs: (f, after) => (after === 'resumed' ? 0 : Math.max(context.pollIntervalMs, f.notes.notBefore - clock.now())),

    async get(f) {
      try {
        const look = await read(f);
        f.notes.lastFailure = undefined;
        return look;
      } catch (error) {
        return failedReading(f, error);
      }
    },

    async cancel(providerJobId, notes) {
      notes?.early?.close();
      const { promptId } = parseJobId(providerJobId);
      if (promptId) await stopAtServer(promptId);
    },

    overdue(f) {
      const last = f.notes.lastFailure;
      if (last && (last.code === PROVIDER_ERROR_CODES.unavailable || last.code === PROVIDER_ERROR_CODES.error))
        return { type: 'failed', errorCode: last.code, errorMessage: `${last.message} (until the job's deadline)` };
      return {
        type: 'failed',
        errorCode: PROVIDER_ERROR_CODES.timeout,
        errorMessage: "The prompt did not finish by the job's deadline; it was stopped at ComfyUI.",
      };
    },

    async close() {
      closed = true;
      for (const channel of [...channels]) channel.close();
      await agent.close().catch(() => undefined);
    },
  };
}

/** `<prompt_id>:<client_id>`; a bare prompt id is followed by polling and a socket of its own. */
export function parseJobId(providerJobId: string): { promptId?: string; clientId?: string } {
  const [promptId, clientId] = providerJobId.split(':');
  const valid = (text: string | undefined) => text !== undefined && /^[A-Za-z0-9_-]{1,128}$/.test(text);
  if (!valid(promptId)) return {};
  return valid(clientId) ? { promptId, clientId } : { promptId };
}
