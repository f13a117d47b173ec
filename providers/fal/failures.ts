import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage } from '../adapter.ts';
import { statusFailure, type UpstreamResponse } from '../upstream-http.ts';

/**
 * fal's error answers as our failures. Two shapes are documented: model errors
 * (https://docs.fal.ai/model-apis/errors), `{"detail": [{loc, msg, type, ...}]}` with 422 for input and
 * `type: "content_policy_violation"` for the content checker; and request errors
 * (https://docs.fal.ai/model-apis/request-errors), `{"detail": "...", "error_type": "request_timeout"}`.
 * Older apps answer `{"detail": "..."}`.
 */

/** The words of an error body, for the job's message: `prompt: Field required; ...` or the detail string. */
export function detailText(body: unknown): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const { detail, error_type: errorType, message } = body as { detail?: unknown; error_type?: unknown; message?: unknown };
  let text: string | undefined;
  if (typeof detail === 'string') text = detail;
  else if (Array.isArray(detail)) {
    text = detail
      .map((item) => {
        const { loc, msg, type } = (item ?? {}) as { loc?: unknown; msg?: unknown; type?: unknown };
        const where = Array.isArray(loc) ? loc.filter((part) => part !== 'body').join('.') : '';
        const what = typeof msg === 'string' ? msg : typeof type === 'string' ? type : JSON.stringify(item);
        return where ? `${where}: ${what}` : what;
      })
      .join('; ');
  } else if (typeof message === 'string') text = message;
  if (text !== undefined && typeof errorType === 'string') text = `${text} (${errorType})`;
  return text;
}

const CONTENT_POLICY = /content[ _-]?policy|content checker|nsfw|unsafe content|safety checker/i;

/** Whether a refusal is the content checker's: the documented error type, or its usual wording. */
export function isContentPolicy(body: unknown, text: string): boolean {
  const detail = (body as { detail?: unknown } | null)?.detail;
  if (Array.isArray(detail) && detail.some((item) => (item as { type?: unknown } | null)?.type === 'content_policy_violation')) return true;
  if ((body as { error_type?: unknown } | null)?.error_type === 'content_policy_violation') return true;
  return CONTENT_POLICY.test(text);
}

/**
 * A non-2xx answer of fal's result URL: the app's own refusal or failure (fal keeps the app's status). 422
 * (and 400) is the input, unless the content checker spoke; a request cancelled at fal by someone else is
 * `provider_cancelled`; the rest as any upstream status.
 */
export function resultFailure(response: UpstreamResponse, secrets: readonly string[], text = detailText(response.json) ?? response.text): ProviderFailure {
  const said = upstreamMessage(text, secrets);
  if (response.status >= 400 && response.status < 500 && isContentPolicy(response.json, text)) {
    return new ProviderFailure(PROVIDER_ERROR_CODES.contentPolicy, `fal's content checker refused the job (${response.status}): ${said}`);
  }
  if (response.status === 400 && /cancel/i.test(text)) return new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, `The job was cancelled at fal: ${said}`);
  const errorType = (response.json as { error_type?: unknown } | null | undefined)?.error_type;
  if (errorType === 'request_timeout' || errorType === 'startup_timeout') {
    return new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `fal gave up on the job (${response.status}): ${said}`);
  }
  return statusFailure(response, text, secrets);
}

/**
 * A webhook's `status: "ERROR"` delivery: `error` holds e.g. "Invalid status code: 422" and `payload` the
 * app's error body, read as the result URL's answer would be.
 */
export function webhookFailure(delivery: { error?: unknown; payload?: unknown; payload_error?: unknown }, secrets: readonly string[]): ProviderFailure {
  const error = typeof delivery.error === 'string' ? delivery.error : 'fal reported an error';
  const status = Number(/\b([45]\d\d)\b/.exec(error)?.[1] ?? 500);
  const detail = detailText(delivery.payload) ?? (typeof delivery.payload_error === 'string' ? delivery.payload_error : undefined);
  const text = detail ? `${error}: ${detail}` : error;
  return resultFailure({ status, headers: {}, text, json: delivery.payload, bytes: Buffer.from(text) }, secrets, text);
}
