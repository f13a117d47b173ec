import type { Mode } from '../domain/catalog/models.ts';
import type { Clock } from '../runtime/clock.ts';

/**
 * The contract of a real provider's adapter (Replicate, Cog, fal, OpenAI, ComfyUI). One adapter instance
 * serves one configured deployment: a provider kind's settings (key, base URL, webhook secret) together with
 * the deployment's target (the upstream model, version, app or workflow) from the catalog.
 *
 * Three ways a job moves:
 * - `submit` hands a new job over and resolves once the provider accepted it, with the provider's job id.
 *   The caller makes that id durable before anything else; the adapter then follows the job (polling,
 *   a socket, or events) and tells what happens through `report`.
 * - `resume` follows a job accepted earlier, by this process or another one (after kill -9, a failover or a
 *   handover), from its provider job id alone. It never submits again.
 * - `verifyEvent` (any node, stateless: configuration only) checks an inbound event's signature and says
 *   which provider job it is about; the job's owner then passes it to `deliverEvent` of the adapter that
 *   follows the job, which reports what it means. Events out of order or repeated leave one outcome:
 *   an adapter reports at most one terminal update per job, and ignores anything after it.
 *
 * Failures are data, never exceptions: a job that cannot be made ends with a `failed` update whose
 * `errorCode` is one of PROVIDER_ERROR_CODES and whose message keeps the upstream's words, trimmed and
 * free of secrets. Only `submit` may throw (a ProviderFailure), when the provider refused the job; the
 * job then ends failed with that code. Every call is bounded in time and in the size of its answer; every
 * URL the provider hands back is fetched through `fetchOutput` (the egress guard).
 */
export interface ProviderAdapter {
  /** The provider kind: 'openai', 'replicate', 'cog', 'fal', 'comfyui'. */
  readonly kind: string;
  /** Jobs this deployment takes at once, across all workspaces; undefined for no limit. */
  readonly maxConcurrentJobs?: number;
  /** It answers within the request that hands a job over and keeps nothing to look up later (providers/provider.ts). */
  readonly answersWithinRequest?: boolean;
  submit(job: AdapterJob, report: Report): Promise<{ providerJobId: string }>;
  /** Follows the job `providerJobId` to its end, reporting as after `submit`; never submits it again. */
  resume(providerJobId: string, job: AdapterJob, report: Report): void;
  /** Asks the provider to stop the job; whatever it answers (already finished, unknown), nothing throws. */
  cancel(providerJobId: string): Promise<void>;
  /** Checks an inbound event (signature, freshness); stateless, callable on any node. Absent: the kind sends none. */
  verifyEvent?(event: InboundEvent): VerifiedEvent;
  /** An event verified by `verifyEvent` for a job this adapter follows (submitted or resumed here). */
  deliverEvent?(providerJobId: string, payload: unknown, jobId?: string): void;
  /** Stops every poll, socket and timer (the service is stopping); the jobs stay at the provider. */
  close(): Promise<void>;
}

export type Report = (update: AdapterUpdate) => void;

export interface AdapterJob {
  /** Our generation id (Cog uses it as its prediction id: a PUT resubmitted after a crash is the same run). */
  generationId: string;
  mode: Mode;
  modelId: string;
  /** Our standard parameters (SPEC section 2), validated, with defaults filled in. */
  params: Record<string, unknown>;
  /**
   * The upstream's input, mapped from `params` by the deployment's mapping in the catalog (renames, fixed
   * values, aspect ratio to width and height). Adapters of providers with free-form inputs (Replicate, Cog,
   * fal, ComfyUI placeholders) send it; the OpenAI adapter maps `params` onto its documented fields itself.
   */
  input: Record<string, unknown>;
  /** Input files, already fetched and checked: images (image_to_image, image_to_video), videos, an optional mask. */
  inputs: { images: InputFile[]; videos: InputFile[]; mask?: InputFile };
  /** Epoch milliseconds by which the job must be over (Replicate's Cancel-After; 429 waits end there). */
  deadline: number;
  /**
   * Handed over again after a restart that came before its provider job id was written: the submission before
   * the restart may have reached the provider, whose first event then adopts the job (docs/providers/*.md).
   */
  afterRestart?: boolean;
}

export interface OutputFile {
  bytes: Buffer;
  contentType: string;
  mediaType: 'image' | 'audio' | 'video';
  width?: number;
  height?: number;
  durationSeconds?: number;
}

export interface InputFile {
  bytes: Buffer;
  contentType: string;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export type AdapterUpdate =
  | { type: 'running' }
  /**
   * A piece of a text answer as the provider streams it (a chat completion's `delta.content`, a Replicate
   * `output` event), reported as it arrives, never buffered. Not a state change: the job's `textOutput` is
   * still the `succeeded` update's, which equals the deltas concatenated.
   */
  | { type: 'output'; delta: string }
  /** Something for the job's timeline (a queue position, the last lines of the logs, a 429 wait); not a state change. */
  | { type: 'progress'; detail: string }
  | { type: 'succeeded'; textOutput?: string; files: OutputFile[]; usage?: TokenUsage }
  /**
   * `usage`: what the provider reported before it failed (a stream that broke after its usage chunk); the
   * service counts the streamed text otherwise.
   */
  | { type: 'failed'; errorCode: ProviderErrorCode; errorMessage: string; usage?: TokenUsage };

export interface InboundEvent {
  /** Lower-cased header names. */
  headers: Record<string, string | undefined>;
  /** The raw body, exactly as received (signatures cover these bytes). */
  body: Buffer;
  /** The query string's parameters (Cog's per-job token rides there). */
  query: Record<string, string | undefined>;
  /** Now, epoch milliseconds (for the signature's freshness window). */
  now: number;
}

export type VerifiedEvent =
  | {
      ok: true;
      /** The provider's job id this event is about. */
      providerJobId: string;
      /** A unique id of the event for de-duplication (Standard Webhooks' webhook-id, fal's request id + status). */
      eventId: string;
      /** What `deliverEvent` gets on the owning node (parsed body). */
      payload: unknown;
      /**
       * Our generation id, when the event's URL carries it with a token only this service can make: a job whose
       * submission's answer was lost (so it has no provider job id yet) is found and adopted by it.
       */
      jobId?: string;
    }
  | { ok: false; message: string };

/** Our error codes for upstream failures (docs/providers.md has the table). */
export const PROVIDER_ERROR_CODES = {
  /** 429, after waiting out its Retry-After up to the job's deadline. */
  rateLimited: 'provider_rate_limited',
  /** No complete answer in time, or the job passed its deadline at the provider. */
  timeout: 'provider_timeout',
  /** Connection refused or reset, DNS, 502/503/504, the provider's own outage. */
  unavailable: 'provider_unavailable',
  /** A 2xx answer that is not what the API documents (not JSON, fields missing, an output of the wrong type, too large). */
  badResponse: 'provider_bad_response',
  /** 401 or 403: the operator's key is wrong or lacks access. */
  authFailed: 'provider_auth_failed',
  /** The provider refused the input (400/422, a prediction failed on its input). */
  inputRejected: 'provider_input_rejected',
  /** The provider's safety system refused the prompt or the output (NSFW, content policy). */
  contentPolicy: 'provider_content_policy',
  /** An output URL could not be fetched (expired, refused by the egress guard, too large). */
  outputFetch: 'provider_output_fetch_failed',
  /** The job was cancelled or aborted at the provider, not by us. */
  cancelled: 'provider_cancelled',
  /** Any other failure the provider reported (its model raised, a 500). */
  error: 'provider_error',
} as const;

export type ProviderErrorCode = (typeof PROVIDER_ERROR_CODES)[keyof typeof PROVIDER_ERROR_CODES];

/** A provider's refusal or failure, carried as data: the code is ours, the message the upstream's (trimmed). */
export class ProviderFailure extends Error {
  constructor(
    readonly code: ProviderErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ProviderFailure';
  }
}

/** Settings every adapter gets besides its own. */
export interface AdapterContext {
  /** Fetches a URL the provider handed back (an output file) through the egress guard, bounded in size and time. */
  fetchOutput(url: string): Promise<Buffer>;
  /**
   * Where the provider sends its events for this deployment: `${BASE_URL}/v1/providers/{deployment}/events`.
   * Undefined when the service has no public URL: the adapter then polls only.
   */
  eventsUrl?: string;
  /** Largest answer body accepted from the provider's API (JSON). */
  maxResponseBytes: number;
  /** Largest output file accepted. */
  maxOutputBytes: number;
  /** Poll interval while no event arrives (the backstop), milliseconds. */
  pollIntervalMs: number;
  /** Bound on each HTTP call to the provider, milliseconds. */
  requestTimeoutMs: number;
  /** Calls one request may take while the provider answers 429 (the deployment's `limits.rateLimitAttempts`); default DEFAULT_RATE_LIMIT_ATTEMPTS. */
  rateLimitAttempts?: number;
  now(): number;
  /** The service's clock: the follower's polls, deadlines and waits run on it (providers/follower.ts); absent, the system's. */
  clock?: Clock;
}

/** Trims an upstream's message for the job's error: one line, at most 500 characters, any `secret` removed. */
export function upstreamMessage(text: string, secrets: readonly string[] = []): string {
  let message = text.replace(/\s+/g, ' ').trim();
  for (const secret of secrets) if (secret) message = message.split(secret).join('[redacted]');
  message = message.replace(/\b(Bearer|Key|Token)\s+[A-Za-z0-9._~+/=-]{8,}/gi, '$1 [redacted]');
  return message.length > 500 ? `${message.slice(0, 497)}...` : message;
}

/** Milliseconds a `Retry-After` header asks for (seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
