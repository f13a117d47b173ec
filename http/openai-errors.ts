import { ERRORS, type ErrorCode, ParamError, type ApiError } from './errors.ts';

/**
 * Errors of the OpenAI-compatible door (every path under /openai/) in OpenAI's shape,
 * `{"error":{"message","type","param","code"}}`, with statuses the official SDKs map to their classes
 * (docs/openai-compatible.md, Errors): 400 BadRequestError, 401 AuthenticationError, 402 (no credits: an
 * APIError the SDKs do not retry), 403 PermissionDeniedError, 404 NotFoundError, 409 ConflictError,
 * 422 UnprocessableEntityError, 429 RateLimitError (with Retry-After), 5xx InternalServerError.
 */
const SHAPES: Partial<Record<ErrorCode, { type: string; code: string | null }>> = {
  unauthenticated: { type: 'invalid_request_error', code: 'invalid_api_key' },
  insufficient_credits: { type: 'insufficient_quota', code: 'insufficient_quota' },
  wallet_insufficient_balance: { type: 'insufficient_quota', code: 'insufficient_quota' },
  forbidden: { type: 'invalid_request_error', code: 'insufficient_permissions' },
  plan_limit_reached: { type: 'invalid_request_error', code: 'plan_limit_reached' },
  wallet_pending_minimum: { type: 'insufficient_quota', code: 'wallet_pending_minimum' },
  rate_limited: { type: 'requests', code: 'rate_limit_exceeded' },
  conflict: { type: 'invalid_request_error', code: 'idempotency_key_reused' },
};

export const OPENAI_PREFIX = '/openai/';

export function isOpenAiPath(path: string): boolean {
  return path.startsWith(OPENAI_PREFIX);
}

/** The body of an error in OpenAI's shape. */
export function openAiErrorBody(code: ErrorCode, message: string, param: string | null = null, openAiCode?: string | null): string {
  const status = ERRORS[code].status;
  const shape = SHAPES[code] ?? { type: status >= 500 ? 'server_error' : 'invalid_request_error', code: null };
  return JSON.stringify({ error: { message, type: shape.type, param, code: openAiCode ?? shape.code } });
}

export function openAiErrorOf(error: ApiError): string {
  return error instanceof ParamError ? openAiErrorBody(error.code, error.message, error.param, error.openAiCode) : openAiErrorBody(error.code, error.message);
}
