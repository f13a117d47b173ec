import { randomUUID } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import type { OutputFile, Provider, ProviderJob, ProviderUpdate } from '../provider.ts';
import { imageDimensions, sniffContentType } from '../local/sniff.ts';
import { readLimited } from '../../runtime/read-limited.ts';

/**
 * An OpenAI-compatible server as a provider: chat completions for text_to_text, images/generations for
 * text_to_image (images as b64_json, or as URLs that are fetched through the egress guard). Every call is
 * bounded in time and size; whatever goes wrong ends the job as `failed` with one of OPENAI_ERROR_CODES.
 */
export interface OpenAiProviderOptions {
  /** e.g. https://api.openai.com/v1; the paths /chat/completions and /images/generations are appended. */
  baseUrl: string;
  apiKey: string;
  /** The upstream model names our catalog's openai/chat and openai/image map to. */
  chatModel: string;
  imageModel: string;
  /** The whole call, from sending the request to the last byte of the answer. */
  timeoutMs: number;
  /** Jobs in flight at once on this server; undefined for no limit (the scheduler keeps to it). */
  maxConcurrentJobs?: number;
  /** Fetches an image URL the server answered with, through the egress guard. */
  fetchOutput(url: string): Promise<Buffer>;
  /** Largest answer body accepted (b64_json images make it large). */
  maxResponseBytes?: number;
}

export const OPENAI_ERROR_CODES = {
  /** The server answered with an error status (4xx/5xx other than 429). */
  error: 'provider_error',
  /** The server answered 429. */
  rateLimited: 'provider_rate_limited',
  /** No complete answer within the time-out. */
  timeout: 'provider_timeout',
  /** The server could not be reached (connection refused, reset, DNS). */
  unavailable: 'provider_unavailable',
  /** A 2xx answer that is not what the API promises (not JSON, no choices, an image that is not an image). */
  badResponse: 'provider_bad_response',
  /** An image URL in the answer could not be fetched (or the egress guard refused it). */
  outputFetch: 'provider_output_fetch_failed',
} as const;

/** Our six aspect ratios as the sizes the images API takes (DALL·E 3: square, landscape, portrait). */
export const OPENAI_IMAGE_SIZES: Record<string, string> = {
  '1:1': '1024x1024', '16:9': '1792x1024', '21:9': '1792x1024', '4:3': '1792x1024', '9:16': '1024x1792', '3:4': '1024x1792',
};

const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

class ProviderFailure extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = 'ProviderFailure';
  }
}

export function openAiProvider(options: OpenAiProviderOptions): Provider {
  const base = options.baseUrl.replace(/\/+$/, '');
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const agent = new Agent({ connectTimeout: Math.min(options.timeoutMs, 10_000), headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs });
  const jobs = new Map<string, AbortController>();

  async function call(path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    let response: Dispatcher.ResponseData;
    try {
      response = await request(`${base}${path}`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${options.apiKey}`, accept: 'application/json' },
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      throw failureOf(error, signal);
    }
    let text: string;
    try {
      text = (await readLimited(response.body, maxBytes, () => Object.assign(new Error('response too large'), { code: 'response_too_large' }))).toString('utf8');
    } catch (error) {
      throw failureOf(error, signal);
    }
    if (response.statusCode < 200 || response.statusCode > 299) {
      const upstream = errorMessageOf(text);
      const code = response.statusCode === 429 ? OPENAI_ERROR_CODES.rateLimited : OPENAI_ERROR_CODES.error;
      throw new ProviderFailure(code, `The provider answered ${response.statusCode}${upstream ? `: ${upstream}` : ''}.`);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new ProviderFailure(OPENAI_ERROR_CODES.badResponse, 'The provider answered with something other than JSON.');
    }
  }

  function failureOf(error: unknown, signal: AbortSignal): ProviderFailure {
    if (error instanceof ProviderFailure) return error;
    const name = (error as { name?: string; code?: string }).name ?? '';
    const code = (error as { code?: string }).code ?? '';
    if (signal.aborted || name === 'TimeoutError' || /TIMEOUT/.test(code)) {
      return new ProviderFailure(OPENAI_ERROR_CODES.timeout, `The provider did not answer within ${options.timeoutMs} ms.`);
    }
    if (code === 'response_too_large') return new ProviderFailure(OPENAI_ERROR_CODES.badResponse, `The provider's answer is larger than ${maxBytes} bytes.`);
    return new ProviderFailure(OPENAI_ERROR_CODES.unavailable, `The provider could not be reached: ${(error as Error).message}`);
  }

  async function chat(job: ProviderJob, signal: AbortSignal): Promise<ProviderUpdate> {
    const p = job.params;
    const messages = [
      ...(typeof p.systemPrompt === 'string' && p.systemPrompt ? [{ role: 'system', content: p.systemPrompt }] : []),
      { role: 'user', content: String(p.prompt ?? '') },
    ];
    const answer = await call('/chat/completions', {
      model: options.chatModel,
      messages,
      ...(typeof p.temperature === 'number' ? { temperature: p.temperature } : {}),
      ...(typeof p.maxTokens === 'number' ? { max_tokens: p.maxTokens } : {}),
      ...(typeof p.seed === 'number' ? { seed: p.seed } : {}),
    }, signal) as { choices?: Array<{ message?: { content?: unknown } }> };
    const content = answer?.choices?.[0]?.message?.content;
    if (typeof content !== 'string') throw new ProviderFailure(OPENAI_ERROR_CODES.badResponse, 'The provider\'s answer has no choices[0].message.content.');
    return { type: 'succeeded', textOutput: content, files: [] };
  }

  async function images(job: ProviderJob, signal: AbortSignal): Promise<ProviderUpdate> {
    const p = job.params;
    const count = typeof p.numImages === 'number' ? p.numImages : 1;
    const answer = await call('/images/generations', {
      model: options.imageModel,
      prompt: String(p.prompt ?? ''),
      n: count,
      size: OPENAI_IMAGE_SIZES[typeof p.aspectRatio === 'string' ? p.aspectRatio : '1:1'] ?? OPENAI_IMAGE_SIZES['1:1'],
      response_format: 'b64_json',
    }, signal) as { data?: Array<{ b64_json?: unknown; url?: unknown }> };
    const data = answer?.data;
    if (!Array.isArray(data) || data.length === 0) throw new ProviderFailure(OPENAI_ERROR_CODES.badResponse, 'The provider\'s answer has no images (data is empty).');
    // Every image asked for is paid for, so fewer is a failure, not a partial success.
    if (data.length < count) throw new ProviderFailure(OPENAI_ERROR_CODES.badResponse, `The provider answered with ${data.length} of the ${count} images asked for.`);
    const files: OutputFile[] = [];
    for (const item of data.slice(0, count)) {
      let bytes: Buffer;
      if (typeof item?.b64_json === 'string') {
        bytes = Buffer.from(item.b64_json, 'base64');
      } else if (typeof item?.url === 'string') {
        try {
          bytes = await options.fetchOutput(item.url);
        } catch (error) {
          throw new ProviderFailure(OPENAI_ERROR_CODES.outputFetch, `The image at the URL the provider gave could not be fetched: ${(error as Error).message}`);
        }
      } else {
        throw new ProviderFailure(OPENAI_ERROR_CODES.badResponse, 'An image in the provider\'s answer has neither b64_json nor url.');
      }
      if (signal.aborted) throw failureOf(new Error('aborted'), signal);
      const contentType = sniffContentType(bytes);
      if (!contentType?.startsWith('image/')) throw new ProviderFailure(OPENAI_ERROR_CODES.badResponse, 'An image in the provider\'s answer is not a PNG, JPEG, GIF or WEBP file.');
      const size = imageDimensions(bytes);
      files.push({ bytes, contentType, mediaType: 'image', width: size?.width, height: size?.height });
    }
    return { type: 'succeeded', files };
  }

  return {
    name: 'openai',
    maxConcurrentJobs: options.maxConcurrentJobs,
    async submit(job, report) {
      if (job.mode !== 'text_to_text' && job.mode !== 'text_to_image') {
        throw new Error(`the OpenAI-compatible adapter makes text_to_text and text_to_image, not ${job.mode}`);
      }
      const providerJobId = `openai_${randomUUID()}`;
      const controller = new AbortController();
      jobs.set(providerJobId, controller);
      const timer = setTimeout(() => controller.abort(new DOMException('timed out', 'TimeoutError')), options.timeoutMs);
      timer.unref();
      // The request goes out on a later turn: submit answers first, as the provider interface expects.
      setImmediate(() => {
        if (controller.signal.aborted) return;
        report({ type: 'running' });
        const work = job.mode === 'text_to_text' ? chat(job, controller.signal) : images(job, controller.signal);
        work.then(
          (update) => { if (jobs.has(providerJobId)) report(update); },
          (error: unknown) => {
            if (!jobs.has(providerJobId)) return;
            const failure = error instanceof ProviderFailure ? error : failureOf(error, controller.signal);
            report({ type: 'failed', errorCode: failure.code, errorMessage: failure.message });
          },
        ).finally(() => {
          clearTimeout(timer);
          jobs.delete(providerJobId);
        });
      });
      return { providerJobId };
    },
    cancel(providerJobId) {
      const controller = jobs.get(providerJobId);
      if (!controller) return;
      jobs.delete(providerJobId);
      controller.abort(new DOMException('cancelled', 'AbortError'));
    },
  };
}

/** The `error.message` of an OpenAI-style error body, shortened; undefined when there is none. */
function errorMessageOf(text: string): string | undefined {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } })?.error?.message;
    return typeof message === 'string' ? message.slice(0, 300) : undefined;
  } catch {
    return undefined;
  }
}
