import { PROVIDER_ERROR_CODES, ProviderFailure, retryAfterMs, upstreamMessage, type AdapterContext, type InputFile } from '../adapter.ts';
import { requestUpstream, retryingRateLimits, statusFailure, type UpstreamRequest, type UpstreamResponse } from '../upstream-http.ts';
import { FormData } from 'undici';
import { isObject, readHistory, type HistoryReading, type OutputRef } from './history.ts';
import type { ComfyuiSettings } from './settings.ts';
import type { ApiWorkflow } from './workflow.ts';

/**
 * ComfyUI's HTTP routes (server.py), one bounded call each through requestUpstream: the base URL is the
 * operator's, so trusted, and output files come from it too (`/view`), never from a URL it hands back.
 * Failures are ProviderFailure with our code and ComfyUI's words, the key redacted.
 */
export interface QueueState {
  running: string[];
  pending: string[];
}

/** A 429's wait, for the job's timeline. */
export type OnWait = (ms: number) => void;

/** How a 429's wait is waited (the job follower's clock, cut short by `signal`: then no other attempt); a timer of its own without it. */
export interface Waits {
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  signal: AbortSignal;
}

/** A failure that may carry the 429's Retry-After, for a follower to wait out between polls. */
export class ComfyuiFailure extends ProviderFailure {
  constructor(
    code: ProviderFailure['code'],
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(code, message);
  }
}

export class ComfyuiClient {
  private readonly secrets: string[];

  constructor(
    private readonly settings: ComfyuiSettings,
    private readonly context: AdapterContext,
  ) {
    this.secrets = settings.apiKey ? [settings.apiKey] : [];
  }

  /** `POST /upload/image` (multipart: image, overwrite, type=input); answers the name a LoadImage node takes. */
  async upload(file: InputFile, filename: string, deadline: number, onWait: OnWait, waits?: Waits): Promise<string> {
    const response = await this.withRateLimits(
      () => {
        const form = new FormData();
        form.append('image', new Blob([new Uint8Array(file.bytes)], { type: file.contentType }), filename);
        // undici's own FormData: the global one is another copy of undici's class, which its request() does not take.
        // Our file names are the generation's own, so a resubmitted job overwrites rather than piling up copies.
        form.append('overwrite', 'true');
        form.append('type', 'input');
        return this.call('POST', '/upload/image', { body: form });
      },
      deadline,
      onWait,
      waits,
    );
    if (response.status !== 200) throw this.failure(response, 'The upload of an input file was refused');
    const answer = response.json;
    if (!isObject(answer) || typeof answer.name !== 'string' || answer.name === '') {
      throw badResponse('the upload answer has no name');
    }
    const subfolder = typeof answer.subfolder === 'string' ? answer.subfolder : '';
    return subfolder ? `${subfolder}/${answer.name}` : answer.name;
  }

  /**
   * `POST /prompt` with `{ prompt, client_id, prompt_id }` → `{ prompt_id, number, node_errors }`. The
   * prompt_id we choose is kept by current servers (and ignored by older ones): either way the answer's id
   * is the one followed. A 400 is ComfyUI's validation refusing the workflow.
   */
  async queuePrompt(workflow: ApiWorkflow, clientId: string, promptId: string, deadline: number, onWait: OnWait, waits?: Waits): Promise<string> {
    const body = JSON.stringify({ prompt: workflow, client_id: clientId, prompt_id: promptId });
    const response = await this.withRateLimits(() => this.call('POST', '/prompt', { body, json: true }), deadline, onWait, waits);
    if (response.status === 400 && isObject(response.json) && 'error' in response.json) {
      throw new ProviderFailure(
        PROVIDER_ERROR_CODES.inputRejected,
        upstreamMessage(`ComfyUI refused the workflow: ${describeRejection(response.json)}`, this.secrets),
      );
    }
    if (response.status !== 200) throw this.failure(response, 'The prompt was refused');
    const answer = response.json;
    if (!isObject(answer) || typeof answer.prompt_id !== 'string' || answer.prompt_id === '') {
      throw badResponse('the /prompt answer has no prompt_id');
    }
    return answer.prompt_id;
  }

  /** `GET /history/{prompt_id}`: the source of truth for a prompt's end. */
  async history(promptId: string, outputNodes?: readonly string[]): Promise<HistoryReading> {
    const response = await this.call('GET', `/history/${encodeURIComponent(promptId)}`);
    if (response.status !== 200) throw this.failure(response, 'The history could not be read');
    if (response.json === undefined) throw badResponse('the history answer is not JSON');
    return readHistory(response.json, promptId, outputNodes);
  }

  /** `GET /queue`: `queue_running` and `queue_pending`, lists of [number, prompt_id, prompt, extra_data, outputs]. */
  async queue(): Promise<QueueState> {
    const response = await this.call('GET', '/queue');
    if (response.status !== 200) throw this.failure(response, 'The queue could not be read');
    const answer = response.json;
    if (!isObject(answer) || !Array.isArray(answer.queue_running) || !Array.isArray(answer.queue_pending)) {
      throw badResponse('the queue answer has no queue_running and queue_pending lists');
    }
    const ids = (items: unknown[]) =>
      items.map((item) => (Array.isArray(item) && typeof item[1] === 'string' ? item[1] : undefined)).filter((id): id is string => id !== undefined);
    // Pending items run in order of their number (a heap in ComfyUI): sort so a position means something.
    const pending = [...answer.queue_pending].sort((a, b) => (Array.isArray(a) && Array.isArray(b) ? Number(a[0]) - Number(b[0]) : 0));
    return { running: ids(answer.queue_running), pending: ids(pending) };
  }

  /** `POST /queue` with `{ delete: [prompt_id] }`: takes a prompt that has not started off the queue. */
  async deleteQueued(promptId: string): Promise<void> {
    const response = await this.call('POST', '/queue', { body: JSON.stringify({ delete: [promptId] }), json: true });
    if (response.status !== 200) throw this.failure(response, 'The prompt could not be taken off the queue');
  }

  /** `POST /interrupt` with `{ prompt_id }`: current servers stop only that prompt; callers check it runs first for older ones. */
  async interrupt(promptId: string): Promise<void> {
    const response = await this.call('POST', '/interrupt', { body: JSON.stringify({ prompt_id: promptId }), json: true });
    if (response.status !== 200) throw this.failure(response, 'The prompt could not be interrupted');
  }

  /** `GET /view?filename=&subfolder=&type=`: one output file, at most maxOutputBytes. */
  async view(ref: OutputRef): Promise<Buffer> {
    const query = new URLSearchParams({ filename: ref.filename, subfolder: ref.subfolder, type: ref.type });
    let response: UpstreamResponse & { bytes?: Buffer };
    try {
      response = await this.call('GET', `/view?${query}`, { maxBytes: this.context.maxOutputBytes, raw: true });
    } catch (error) {
      const failure = error as ProviderFailure;
      if (failure.code === PROVIDER_ERROR_CODES.badResponse) {
        throw new ProviderFailure(PROVIDER_ERROR_CODES.outputFetch, `The output ${ref.filename} is larger than ${this.context.maxOutputBytes} bytes.`);
      }
      throw new ProviderFailure(PROVIDER_ERROR_CODES.outputFetch, `The output ${ref.filename} could not be fetched: ${failure.message}`);
    }
    if (response.status === 401 || response.status === 403) throw this.failure(response, 'The output could not be fetched');
    if (response.status !== 200) {
      const gone = response.status === 404 ? ' (ComfyUI no longer has it)' : '';
      throw new ProviderFailure(
        PROVIDER_ERROR_CODES.outputFetch,
        upstreamMessage(`The output ${ref.filename} could not be fetched: ComfyUI answered ${response.status}${gone}.`, this.secrets),
      );
    }
    return response.bytes!;
  }

  private withRateLimits(
    attempt: () => Promise<UpstreamResponse & { bytes?: Buffer }>,
    deadline: number,
    onWait: OnWait,
    waits?: Waits,
  ): Promise<UpstreamResponse> {
    const options = {
      ...(this.context.rateLimitAttempts !== undefined ? { maxAttempts: this.context.rateLimitAttempts } : {}),
      ...(waits ? { sleep: waits.sleep } : {}),
    };
    return retryingRateLimits(attempt, deadline, () => this.context.now(), onWait, 1_000, waits?.signal, options);
  }

  private async call(
    method: UpstreamRequest['method'],
    path: string,
    options: { body?: string | FormData; json?: boolean; maxBytes?: number; raw?: boolean } = {},
  ): Promise<UpstreamResponse> {
    const headers: Record<string, string> = {};
    if (this.settings.apiKey) headers.authorization = `Bearer ${this.settings.apiKey}`;
    if (options.json) headers['content-type'] = 'application/json';
    const request: UpstreamRequest = { method, headers, timeoutMs: this.context.requestTimeoutMs, maxBytes: options.maxBytes ?? this.context.maxResponseBytes };
    if (options.body !== undefined) request.body = options.body;
    // Files are binary: kept as bytes, not decoded as text.
    return requestUpstream(`${this.settings.baseUrl}${path}`, options.raw ? { ...request, as: 'bytes' } : request);
  }

  private failure(response: UpstreamResponse, what: string): ComfyuiFailure {
    const said = isObject(response.json) && typeof response.json.error === 'string' ? response.json.error : response.text.slice(0, 300);
    const failure = statusFailure(response, said || undefined, this.secrets);
    return new ComfyuiFailure(failure.code, `${what}: ${failure.message}`, retryAfterMs(response.headers['retry-after'], this.context.now()));
  }
}

/** ComfyUI's 400: `error` (an object { type, message, details } on current servers, a string on old ones) and node_errors per node. */
export function describeRejection(answer: Record<string, unknown>): string {
  const error = answer.error;
  const parts: string[] = [];
  if (typeof error === 'string') parts.push(error);
  else if (isObject(error)) {
    const message = typeof error.message === 'string' ? error.message : 'invalid prompt';
    parts.push(typeof error.details === 'string' && error.details !== '' ? `${message}: ${error.details}` : message);
  }
  if (isObject(answer.node_errors)) {
    for (const [node, detail] of Object.entries(answer.node_errors)) {
      if (!isObject(detail)) continue;
      const errors = Array.isArray(detail.errors) ? detail.errors.filter(isObject) : [];
      const said = errors.map((e) => (typeof e.details === 'string' && e.details !== '' ? `${e.message}: ${e.details}` : String(e.message))).join('; ');
      parts.push(`node ${node}${typeof detail.class_type === 'string' ? ` (${detail.class_type})` : ''}: ${said || 'invalid'}`);
    }
  }
  return parts.join('; ') || 'the workflow is invalid';
}

function badResponse(what: string): ProviderFailure {
  return new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `ComfyUI's answer is not what its API documents: ${what}.`);
}
