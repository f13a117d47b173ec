import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai/error';
import { PROVIDER_ERROR_CODES, ProviderFailure, retryAfterMs, upstreamMessage, type ProviderErrorCode } from '../adapter.ts';

/**
 * What the openai client threw, as our failure. OpenAI's error bodies are `{ error: { message, type,
 * param, code } }` (platform.openai.com/docs/guides/error-codes); the message is kept, trimmed, with the
 * key taken out.
 */
export function failureOf(error: unknown, secrets: readonly string[]): ProviderFailure {
  if (error instanceof ProviderFailure) return error;
  if (error instanceof APIUserAbortError) return new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The request to the provider was aborted.');
  if (error instanceof APIConnectionTimeoutError) return new ProviderFailure(PROVIDER_ERROR_CODES.timeout, 'The provider did not answer in time.');
  if (error instanceof APIConnectionError) {
    const cause = (error as { cause?: unknown }).cause;
    if (cause instanceof ProviderFailure) return cause;
    const detail = cause instanceof Error ? `${cause.message}${cause.cause instanceof Error ? ` (${cause.cause.message})` : ''}` : error.message;
    return new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, `The provider could not be reached: ${upstreamMessage(detail, secrets)}`);
  }
  if (error instanceof APIError && typeof error.status === 'number') return statusFailureOf(error, secrets);
  // An `error` event in a stream (`data: {"error": {...}}` after the 200): the client throws it with no status.
  if (error instanceof APIError) return streamErrorFailureOf(error, secrets);
  // The client parses a 2xx JSON answer itself: a body that is not JSON surfaces as a SyntaxError.
  if (error instanceof SyntaxError)
    return new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The provider's answer is not valid JSON: ${upstreamMessage(error.message, secrets)}`);
  return new ProviderFailure(PROVIDER_ERROR_CODES.error, upstreamMessage(error instanceof Error ? error.message : String(error), secrets));
}

/** OpenAI's refusals on safety grounds: DALL·E's content_policy_violation, the GPT image models' moderation_blocked. */
const POLICY_CODES = new Set(['content_policy_violation', 'moderation_blocked']);
const POLICY_WORDS = /safety system|content (management )?policy|(rejected|flagged|blocked) by (our |the )?moderation/i;

function statusFailureOf(error: APIError, secrets: readonly string[]): ProviderFailure {
  const status = error.status as number;
  const body = (error.error ?? undefined) as { message?: unknown; code?: unknown; type?: unknown } | undefined;
  const said = typeof body?.message === 'string' ? body.message : error.message.replace(/^\d{3}\s*/, '');
  const code = typeof body?.code === 'string' ? body.code : undefined;
  const ours: ProviderErrorCode =
    status === 401 || status === 403
      ? PROVIDER_ERROR_CODES.authFailed
      : status === 429
        ? PROVIDER_ERROR_CODES.rateLimited
        : status === 400 && ((code !== undefined && POLICY_CODES.has(code)) || POLICY_WORDS.test(said))
          ? PROVIDER_ERROR_CODES.contentPolicy
          : status === 502 || status === 503 || status === 504
            ? PROVIDER_ERROR_CODES.unavailable
            : status >= 500
              ? PROVIDER_ERROR_CODES.error
              : PROVIDER_ERROR_CODES.inputRejected;
  const label = code ? `${status} (${upstreamMessage(code, secrets)})` : String(status);
  return new ProviderFailure(ours, `OpenAI answered ${label}: ${upstreamMessage(said || 'no message', secrets)}`);
}

/**
 * An error OpenAI sent inside a stream, after its 200: `{ error: { message, type, param, code } }` as in its
 * error bodies (a server_error mostly). Mapped by its code and type as the statuses would be.
 */
function streamErrorFailureOf(error: APIError, secrets: readonly string[]): ProviderFailure {
  const body = (error.error ?? undefined) as { message?: unknown; code?: unknown; type?: unknown } | undefined;
  const said = typeof body?.message === 'string' ? body.message : error.message;
  const code = typeof body?.code === 'string' ? body.code : undefined;
  const type = typeof body?.type === 'string' ? body.type : undefined;
  const ours: ProviderErrorCode =
    (code !== undefined && POLICY_CODES.has(code)) || POLICY_WORDS.test(said)
      ? PROVIDER_ERROR_CODES.contentPolicy
      : code === 'rate_limit_exceeded' || type === 'requests' || type === 'tokens'
        ? PROVIDER_ERROR_CODES.rateLimited
        : type === 'invalid_request_error'
          ? PROVIDER_ERROR_CODES.inputRejected
          : PROVIDER_ERROR_CODES.error;
  const label = code ?? type;
  return new ProviderFailure(
    ours,
    `OpenAI reported an error mid-answer${label ? ` (${upstreamMessage(label, secrets)})` : ''}: ${upstreamMessage(said || 'no message', secrets)}`,
  );
}

/**
 * How long a 429 asks us to wait: `retry-after-ms` (OpenAI's, read by its own client first), then
 * `Retry-After` (seconds or a date), else `fallbackMs`. Undefined when waiting cannot help: a spent quota
 * (`insufficient_quota`) stays spent.
 */
export function rateLimitWaitMs(error: APIError, now: number, fallbackMs = 1_000): number | undefined {
  const code = (error.error as { code?: unknown } | undefined)?.code ?? error.code;
  if (code === 'insufficient_quota') return undefined;
  const ms = Number(error.headers?.get('retry-after-ms') ?? NaN);
  if (Number.isFinite(ms) && ms >= 0) return Math.ceil(ms);
  return retryAfterMs(error.headers?.get('retry-after') ?? undefined, now) ?? fallbackMs;
}
