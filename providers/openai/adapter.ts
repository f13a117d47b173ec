import { randomUUID } from 'node:crypto';
import type { ClientOptions, default as OpenAI } from 'openai';
import { RateLimitError } from 'openai/error';
import { toFile } from 'openai/uploads';
import {
  PROVIDER_ERROR_CODES,
  ProviderFailure,
  type AdapterContext,
  type AdapterJob,
  type AdapterUpdate,
  type InputFile,
  type ProviderAdapter,
  type Report,
} from '../adapter.ts';
import { boundedFetch } from './bounded-fetch.ts';
import type { OpenAiDeploymentTarget } from './deployment.ts';
import { failureOf, rateLimitWaitMs } from './failures.ts';
import { ChatStreamReading, chatUpdate, imagesUpdate, speechUpdate } from './outputs.ts';
import { chatRequest, imageCount, imageGenerateRequest, imageResponseFormat, imageSize, speechRequest } from './requests.ts';
import type { OpenAiSettings } from './settings.ts';
import { streamingFetch } from './streaming-fetch.ts';
import { DEFAULT_RATE_LIMIT_ATTEMPTS, rateLimitBackoffMs } from '../upstream-http.ts';

/** The first backoff after a 429 that asks for no wait (doubling, with jitter: providers/upstream-http.ts). */
const RATE_LIMIT_BASE_MS = 1_000;

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
/** Each call's id (the job's), sent to OpenAI too (its support can find the request by it). */
const REQUEST_ID_HEADER = 'X-Client-Request-Id';

/**
 * OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp's server, LM Studio) through the official
 * `openai` client: chat completions (text_to_text), images/generations (text_to_image), images/edits
 * (image_to_image) and audio/speech (text_to_audio).
 *
 * Each job is one HTTP call that answers with the result, so the provider job id is ours
 * (`openai_<uuid>`, also sent as X-Client-Request-Id) and nothing can be looked up later: `resume` of a job
 * this process no longer holds fails it (OPENAI_RESUME_LOST). The client's own retries are off; a 429 is
 * waited out here, up to the job's deadline. A chat answer is streamed (unless the deployment's `stream` is
 * false): each piece of its text is reported as an `output` update as it arrives, through streamingFetch,
 * which bounds the stream's bytes and time as it flows. Every other answer is read whole, bounded in bytes
 * and time, by boundedFetch before the client parses it.
 */
export const OPENAI_MODES = ['text_to_text', 'text_to_image', 'image_to_image', 'text_to_audio'] as const;

/** The failure of a job resumed after its request was lost with the process that made it. */
export const OPENAI_RESUME_LOST = {
  code: PROVIDER_ERROR_CODES.error,
  message: (providerJobId: string) =>
    `The request ${providerJobId} to OpenAI was in flight when the service stopped; OpenAI answers within that request and keeps no job to look up, so its outcome is lost.`,
};

interface Running {
  controller: AbortController;
  report: Report;
}

export function createOpenAiAdapter(
  settings: OpenAiSettings,
  deployment: { id: string; target: OpenAiDeploymentTarget },
  context: AdapterContext,
): ProviderAdapter {
  const target = deployment.target;
  const secrets = [settings.apiKey];
  const timeoutMs = settings.timeoutMs ?? context.requestTimeoutMs;
  // Made at the first call: the client's module and its resources (some 115 modules, 0.1-0.2 s) load only
  // in a service that calls OpenAI, not at every start.
  let client: Promise<OpenAI> | undefined;
  /**
   * One client for every call (made once: a client per call costs its resources' objects each time); each
   * call's bounded fetch is found by its X-Client-Request-Id, the job's id, registered for the call.
   */
  const fetches = new Map<string, Fetch>();
  const fetchOfCall: Fetch = (input, init) => {
    const id = new Headers(init?.headers).get(REQUEST_ID_HEADER);
    const fetch = id === null ? undefined : fetches.get(id);
    if (!fetch) return Promise.reject(new Error('A call to OpenAI went out without its bounds.'));
    return fetch(input, init);
  };
  const clientOptions: ClientOptions = {
    apiKey: settings.apiKey,
    baseURL: settings.baseUrl,
    // Passed explicitly so that the client reads nothing from the environment itself.
    organization: settings.organization ?? null,
    project: null,
    webhookSecret: null,
    maxRetries: 0,
    timeout: timeoutMs,
    logLevel: 'off',
  };
  const jobs = new Map<string, Running>();
  let closed = false;

  /**
   * The client for one call: its answer bounded to `maxBytes`, the call to what is left before the deadline.
   * Streamed: the bytes of the whole stream bounded as they flow, each wait (the headers, then between two
   * pieces) to the call's bound, the whole stream to the deadline.
   */
  async function clientFor(
    providerJobId: string,
    job: AdapterJob,
    signal: AbortSignal,
    maxBytes: number,
    streamed = false,
  ): Promise<{ api: OpenAI; options: { signal: AbortSignal; headers: Record<string, string>; timeout: number } }> {
    client ??= import('openai').then(({ default: Client }) => new Client({ ...clientOptions, fetch: fetchOfCall }));
    const api = await client;
    const left = job.deadline - context.now();
    if (left <= 0) throw new ProviderFailure(PROVIDER_ERROR_CODES.timeout, 'The job reached its deadline before OpenAI answered.');
    const ms = Math.max(1, Math.min(timeoutMs, left));
    fetches.set(providerJobId, streamed ? streamingFetch({ maxBytes, idleMs: ms, totalMs: left }) : boundedFetch(maxBytes, ms));
    // The client's own timer (up to the headers only) runs a little longer, so that ours fires first.
    return { api, options: { signal, headers: { [REQUEST_ID_HEADER]: providerJobId }, timeout: ms + 1_000 } };
  }

  /**
   * Calls `call` again after each 429 (not for insufficient_quota), waiting what OpenAI asks or else
   * rateLimitBackoffMs, for at most the deployment's rateLimitAttempts calls and while the wait ends before the
   * deadline; then the 429 is the job's failure (provider_rate_limited, which the router may send on).
   */
  async function waitingOutRateLimits<T>(providerJobId: string, job: AdapterJob, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
    const maxAttempts = context.rateLimitAttempts ?? DEFAULT_RATE_LIMIT_ATTEMPTS;
    let limited: RateLimitError | undefined;
    for (let calls = 1; ; calls++) {
      try {
        return await call();
      } catch (error) {
        // A call after a wait that the deadline overtook (the wait ended just before it, the call did not):
        // the job spent its time waiting out 429s, and fails as rate limited, not as timed out.
        if (limited && !(error instanceof RateLimitError) && context.now() >= job.deadline) throw limited;
        if (!(error instanceof RateLimitError)) throw error;
        limited = error;
        // What OpenAI asks for (retry-after-ms, Retry-After: it says to the millisecond); without either, backoff
        // with jitter, as every adapter waits (providers/upstream-http.ts).
        const asked = rateLimitWaitMs(error, context.now(), 0);
        if (asked === undefined || calls >= maxAttempts) throw error;
        const wait = asked > 0 ? asked : rateLimitBackoffMs(calls, RATE_LIMIT_BASE_MS, undefined);
        if (context.now() + wait >= job.deadline || signal.aborted) throw error;
        jobs.get(providerJobId)?.report({ type: 'progress', detail: `OpenAI answered 429 (rate limited); trying again in ${wait} ms.` });
        await sleep(wait, signal);
        if (signal.aborted || context.now() >= job.deadline) throw error;
      }
    }
  }

  async function make(providerJobId: string, job: AdapterJob, signal: AbortSignal): Promise<AdapterUpdate> {
    type Options = Awaited<ReturnType<typeof clientFor>>['options'];
    const call = <T>(maxBytes: number, request: (api: OpenAI, options: Options) => Promise<T>) =>
      waitingOutRateLimits(providerJobId, job, signal, async () => {
        const { api, options } = await clientFor(providerJobId, job, signal, maxBytes);
        return request(api, options);
      });
    switch (job.mode) {
      case 'text_to_text': {
        if (target.stream !== false) return streamChat(providerJobId, job, signal);
        const body = chatRequest(target, job.params);
        const answer = await call(context.maxResponseBytes, (api, options) => api.chat.completions.create(body, options));
        return chatUpdate(answer, secrets);
      }
      case 'text_to_image': {
        const body = imageGenerateRequest(target, job.params);
        const answer = await call(context.maxResponseBytes, (api, options) => api.images.generate(body, options));
        return imagesUpdate(answer, imageLimits(job, signal), secrets);
      }
      case 'image_to_image': {
        const answer = await call(context.maxResponseBytes, async (api, options) => api.images.edit(await editBody(job), options));
        return imagesUpdate(answer, imageLimits(job, signal), secrets);
      }
      case 'text_to_audio': {
        const { body, contentType } = speechRequest(target, job.params);
        const bytes = await call(context.maxOutputBytes, async (api, options) =>
          Buffer.from(await (await api.audio.speech.create(body, options)).arrayBuffer()),
        );
        return speechUpdate(bytes, contentType, context.maxOutputBytes);
      }
      default:
        throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `The openai adapter does not make ${job.mode}.`);
    }
  }

  /**
   * A chat answer streamed: each piece of its text reported as it arrives (to whoever follows the job now),
   * then its end. A failure after pieces arrived ends the job failed, with the usage if its chunk had come.
   */
  async function streamChat(providerJobId: string, job: AdapterJob, signal: AbortSignal): Promise<AdapterUpdate> {
    const body = { ...chatRequest(target, job.params), stream: true as const, stream_options: { include_usage: true } };
    // A 429 comes before the first byte: waited out as for any call.
    const stream = await waitingOutRateLimits(providerJobId, job, signal, async () => {
      const { api, options } = await clientFor(providerJobId, job, signal, context.maxResponseBytes, true);
      return api.chat.completions.create(body, options);
    });
    const reading = new ChatStreamReading(secrets);
    try {
      for await (const chunk of stream) {
        const delta = reading.take(chunk);
        if (delta && !signal.aborted) jobs.get(providerJobId)?.report({ type: 'output', delta });
      }
      // The client's stream ends quietly when its request is aborted (a cancel, close): nothing to report.
      if (signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The job was stopped.');
      return reading.end();
    } catch (error) {
      if (signal.aborted) throw error;
      // Stop reading: the connection is closed if anything of it is left.
      stream.controller.abort();
      const failure = failureOf(error, secrets);
      return { type: 'failed', errorCode: failure.code, errorMessage: failure.message, ...(reading.usage ? { usage: reading.usage } : {}) };
    }
  }

  function imageLimits(job: AdapterJob, signal: AbortSignal) {
    return { count: imageCount(job.params), maxOutputBytes: context.maxOutputBytes, fetchOutput: context.fetchOutput, signal };
  }

  /** The edit's multipart fields: one `image` file, or `image[]` for several (the client names them so). */
  async function editBody(job: AdapterJob) {
    const images = await Promise.all(job.inputs.images.map((file, i) => asUpload(file, `image-${i + 1}`)));
    const responseFormat = imageResponseFormat(target);
    return {
      model: target.model,
      prompt: String(job.params.prompt ?? ''),
      image: images.length === 1 ? images[0]! : images,
      ...(job.inputs.mask ? { mask: await asUpload(job.inputs.mask, 'mask') } : {}),
      n: imageCount(job.params),
      size: imageSize(target, job.params) as '1024x1024', // the edit's size type is narrower than the generation's
      ...(responseFormat ? { response_format: responseFormat } : {}),
      ...(target.quality && target.quality !== 'hd' ? { quality: target.quality } : {}),
    };
  }

  /** Checks what can be refused before any call, so that submit throws it. */
  function refusalOf(job: AdapterJob): ProviderFailure | undefined {
    if (!(OPENAI_MODES as readonly string[]).includes(job.mode)) {
      return new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `The openai adapter does not make ${job.mode} (it makes ${OPENAI_MODES.join(', ')}).`);
    }
    try {
      if (job.mode === 'text_to_text') chatRequest(target, job.params);
      if (job.mode === 'text_to_image' || job.mode === 'image_to_image') imageSize(target, job.params);
      if (job.mode === 'text_to_audio') speechRequest(target, job.params);
    } catch (error) {
      if (error instanceof ProviderFailure) return error;
      throw error;
    }
    if (job.mode === 'image_to_image' && job.inputs.images.length === 0) {
      return new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, 'An image edit needs at least one input image.');
    }
    return undefined;
  }

  /** Runs the job's one call and reports its end once, unless it was cancelled or the adapter closed. */
  function start(providerJobId: string, job: AdapterJob): void {
    const running = jobs.get(providerJobId);
    if (!running || running.controller.signal.aborted) return;
    running.report({ type: 'running' });
    make(providerJobId, job, running.controller.signal)
      .finally(() => fetches.delete(providerJobId))
      .then(
        (update) => finish(providerJobId, update),
        (error: unknown) => {
          const failure = failureOf(error, secrets);
          finish(providerJobId, { type: 'failed', errorCode: failure.code, errorMessage: failure.message });
        },
      );
  }

  function finish(providerJobId: string, update: AdapterUpdate): void {
    const running = jobs.get(providerJobId);
    if (!running || running.controller.signal.aborted) return;
    jobs.delete(providerJobId);
    running.report(update);
  }

  return {
    kind: 'openai',
    answersWithinRequest: true,
    ...(settings.maxConcurrentJobs ? { maxConcurrentJobs: settings.maxConcurrentJobs } : {}),

    async submit(job, report) {
      if (closed) throw new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, 'The openai adapter is closed.');
      const refusal = refusalOf(job);
      if (refusal) throw refusal;
      const providerJobId = `openai_${randomUUID()}`;
      jobs.set(providerJobId, { controller: new AbortController(), report });
      // The call goes out on a later turn: the caller stores the id first.
      setImmediate(() => start(providerJobId, job));
      return { providerJobId };
    },

    resume(providerJobId, _job, report) {
      const running = jobs.get(providerJobId);
      if (running) {
        // Still in flight in this process: its answer goes to the new follower.
        running.report = report;
        return;
      }
      setImmediate(() => {
        if (!closed) report({ type: 'failed', errorCode: OPENAI_RESUME_LOST.code, errorMessage: OPENAI_RESUME_LOST.message(providerJobId) });
      });
    },

    async cancel(providerJobId) {
      const running = jobs.get(providerJobId);
      if (!running) return;
      jobs.delete(providerJobId);
      running.controller.abort();
    },

    async close() {
      closed = true;
      for (const running of jobs.values()) running.controller.abort();
      jobs.clear();
    },
  };
}

async function asUpload(file: InputFile, name: string) {
  const extension = file.contentType.split('/')[1]?.replace('jpeg', 'jpg') ?? 'bin';
  return toFile(file.bytes, `${name}.${extension}`, { type: file.contentType });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
