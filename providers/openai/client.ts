import type { ClientOptions, default as OpenAI } from 'openai';
import { boundedFetch } from './bounded-fetch.ts';
import type { OpenAiSettings } from './settings.ts';
import { streamingFetch } from './streaming-fetch.ts';

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
/** The client's per-request `fetchOptions` (its type is not exported by name). */
type FetchOptions = NonNullable<NonNullable<Parameters<OpenAI['audio']['speech']['create']>[1]>['fetchOptions']>;

/** Each call's id (the job's), sent to OpenAI too (its support can find the request by it). */
const REQUEST_ID_HEADER = 'X-Client-Request-Id';

/** Where a call's own bounded fetch rides in its fetch options, which the client hands to `fetch` as they are. */
const CALL_FETCH = Symbol('the bounded fetch of one call');

/** How one call's answer is bounded: its bytes, each wait (the headers; a stream's gap between two pieces). */
export interface CallBounds {
  maxBytes: number;
  timeoutMs: number;
  /** Handed over as it flows (a chat stream), not read whole first. */
  streamed?: boolean;
}

/** What one call passes to the client's method: its cancellation, its id, its bounds. */
export interface CallOptions {
  signal: AbortSignal;
  headers: Record<string, string>;
  timeout: number;
  fetchOptions: FetchOptions;
}

/**
 * The deployment's one `openai` client, made at its first call: the client's module and its resources (some
 * 115 modules, 0.1-0.2 s) load only in a service that calls OpenAI, not at every start, and a client per call
 * would cost its resources' objects each time. Each call carries its own bounded fetch in its options
 * (boundedFetch for an answer read whole, streamingFetch for a streamed one), so nothing is kept per call here.
 */
export function openaiClient(
  settings: OpenAiSettings,
  timeoutMs: number,
): (requestId: string, signal: AbortSignal, bounds: CallBounds) => Promise<{ api: OpenAI; options: CallOptions }> {
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
  const fetchOfCall: Fetch = (input, init) => {
    const fetch = (init as { [CALL_FETCH]?: Fetch } | undefined)?.[CALL_FETCH];
    if (!fetch) return Promise.reject(new Error('A call to OpenAI went out without its bounds.'));
    return fetch(input, init);
  };
  let client: Promise<OpenAI> | undefined;
  return async (requestId, signal, bounds) => {
    client ??= import('openai').then(({ default: Client }) => new Client({ ...clientOptions, fetch: fetchOfCall }));
    const api = await client;
    const ms = bounds.timeoutMs;
    const fetch = bounds.streamed ? streamingFetch({ maxBytes: bounds.maxBytes, idleMs: ms }) : boundedFetch(bounds.maxBytes, ms);
    return {
      api,
      options: {
        signal,
        headers: { [REQUEST_ID_HEADER]: requestId },
        // The client's own timer (up to the headers only) runs a little longer, so that ours fires first.
        timeout: ms + 1_000,
        fetchOptions: { [CALL_FETCH]: fetch } as FetchOptions,
      },
    };
  };
}
