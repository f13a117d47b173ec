import { Agent, request, type Dispatcher } from 'undici';
import { readLimited } from '../runtime/read-limited.ts';
import { PROVIDER_ERROR_CODES, ProviderFailure, retryAfterMs, upstreamMessage, type ProviderErrorCode } from './adapter.ts';

/**
 * One bounded HTTP call to a provider's API (an operator-configured base URL, so trusted: not through the
 * egress guard). Network failures, time-outs and answers over `maxBytes` become ProviderFailure; any status
 * is returned, for the adapter to read (statusFailure maps the usual ones).
 */
export interface UpstreamRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  headers?: Record<string, string>;
  body?: string | Buffer | FormData;
  timeoutMs: number;
  maxBytes: number;
  /** `bytes`: a binary answer (an output file): the body is kept as bytes, not decoded as text or JSON. */
  as?: 'json' | 'bytes';
  signal?: AbortSignal;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** The body parsed as JSON; undefined when it is not JSON. */
  json: unknown;
  /** The body as received. */
  bytes: Buffer;
}

const agents = new Map<number, Agent>();

function agentFor(timeoutMs: number): Agent {
  let agent = agents.get(timeoutMs);
  if (!agent) {
    agent = new Agent({ connectTimeout: Math.min(timeoutMs, 10_000), headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    agents.set(timeoutMs, agent);
  }
  return agent;
}

export async function requestUpstream(url: string, options: UpstreamRequest): Promise<UpstreamResponse> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let response: Dispatcher.ResponseData;
  try {
    response = await request(url, {
      dispatcher: agentFor(options.timeoutMs),
      method: options.method,
      headers: options.headers,
      body: options.body as Dispatcher.RequestOptions['body'],
      signal,
    });
  } catch (error) {
    throw networkFailure(error, timeout.aborted, options.timeoutMs);
  }
  let bytes: Buffer;
  try {
    bytes = await readLimited(
      response.body,
      options.maxBytes,
      () => new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The provider's answer is larger than ${options.maxBytes} bytes.`),
    );
  } catch (error) {
    if (error instanceof ProviderFailure) throw error;
    throw networkFailure(error, timeout.aborted, options.timeoutMs);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers)) {
    if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  if (options.as === 'bytes') return { status: response.statusCode, headers, text: '', json: undefined, bytes };
  const text = bytes.toString('utf8');
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers, text, json, bytes };
}

function networkFailure(error: unknown, timedOut: boolean, timeoutMs: number): ProviderFailure {
  if (error instanceof ProviderFailure) return error;
  const name = (error as { name?: string }).name ?? '';
  const code = (error as { code?: string }).code ?? '';
  if (timedOut || name === 'TimeoutError' || /TIMEOUT/.test(code)) {
    return new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The provider did not answer within ${timeoutMs} ms.`);
  }
  return new ProviderFailure(
    PROVIDER_ERROR_CODES.unavailable,
    `The provider could not be reached: ${upstreamMessage((error as Error).message ?? String(error))}`,
  );
}

/** A non-2xx answer as our failure: 401/403 auth, 429 rate limited, 400/404/413/422 input, 5xx unavailable or error. */
export function statusFailure(response: UpstreamResponse, upstreamText: string | undefined, secrets: readonly string[] = []): ProviderFailure {
  const said = upstreamText ? `: ${upstreamMessage(upstreamText, secrets)}` : '';
  const code: ProviderErrorCode =
    response.status === 401 || response.status === 403
      ? PROVIDER_ERROR_CODES.authFailed
      : response.status === 429
        ? PROVIDER_ERROR_CODES.rateLimited
        : response.status === 502 || response.status === 503 || response.status === 504
          ? PROVIDER_ERROR_CODES.unavailable
          : response.status >= 500
            ? PROVIDER_ERROR_CODES.error
            : PROVIDER_ERROR_CODES.inputRejected;
  return new ProviderFailure(code, `The provider answered ${response.status}${said}.`);
}

/** Calls of one request that a provider's 429s may take, unless the deployment says otherwise (catalog `limits.rateLimitAttempts`). */
export const DEFAULT_RATE_LIMIT_ATTEMPTS = 6;
/** The longest backoff between two of those calls (a Retry-After may ask for longer, and is honoured). */
export const MAX_RATE_LIMIT_BACKOFF_MS = 60_000;

/**
 * The wait after the `n`-th 429 in a row (from 1): exponential from `baseMs` (doubling, at most
 * MAX_RATE_LIMIT_BACKOFF_MS) with equal jitter (between half of it and all of it, so that jobs limited
 * together do not come back together), and never shorter than the provider's Retry-After.
 */
export function rateLimitBackoffMs(n: number, baseMs: number, retryAfter: number | undefined, random: () => number = Math.random): number {
  const ceiling = Math.min(MAX_RATE_LIMIT_BACKOFF_MS, baseMs * 2 ** Math.max(0, n - 1));
  const jittered = Math.round(ceiling / 2 + random() * (ceiling / 2));
  return Math.max(retryAfter ?? 0, jittered);
}

/**
 * Calls `attempt` again after each 429, waiting rateLimitBackoffMs (exponential from `fallbackMs`, with
 * jitter, at least the Retry-After), while the wait ends before `deadline` and at most `maxAttempts` calls
 * are made in all; `onWait` is told of each wait (for the job's timeline). The last 429 is returned as it
 * is (the adapter makes it `provider_rate_limited`, which the router may send to another deployment).
 */
export async function retryingRateLimits(
  attempt: () => Promise<UpstreamResponse>,
  deadline: number,
  now: () => number,
  onWait: (ms: number) => void = () => undefined,
  fallbackMs = 1_000,
  signal?: AbortSignal,
  options: { maxAttempts?: number; random?: () => number; sleep?: (ms: number, signal?: AbortSignal) => Promise<void> } = {},
): Promise<UpstreamResponse> {
  const maxAttempts = options.maxAttempts ?? DEFAULT_RATE_LIMIT_ATTEMPTS;
  for (let calls = 1; ; calls++) {
    const response = await attempt();
    if (response.status !== 429) return response;
    if (calls >= maxAttempts) return response;
    const wait = rateLimitBackoffMs(calls, fallbackMs, retryAfterMs(response.headers['retry-after'], now()), options.random);
    if (now() + wait >= deadline || signal?.aborted) return response;
    onWait(wait);
    // The follower's clock when it gives one (providers/follower.ts), else a timer of its own.
    if (options.sleep) await options.sleep(wait, signal);
    else
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
    // Aborted, or the deadline overtook the wait: the job was rate limited until then.
    if (signal?.aborted || now() >= deadline) return response;
  }
}
