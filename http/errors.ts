/**
 * The one registry of every error the API answers: code, HTTP status and default message.
 * Handlers throw `new ApiError(code, message?)`; http/respond.ts renders it.
 */
export const ERRORS = {
  validation_error: { status: 400, message: 'The request is not valid.' },
  unauthenticated: { status: 401, message: 'Authentication is required.' },
  insufficient_credits: { status: 402, message: 'The workspace does not have enough credits.' },
  wallet_insufficient_balance: { status: 402, message: 'The wallet balance is too low.' },
  forbidden: { status: 403, message: 'You are not allowed to do this.' },
  not_found: { status: 404, message: 'The resource was not found.' },
  method_not_allowed: { status: 405, message: 'This method is not allowed on this path.' },
  conflict: { status: 409, message: 'The request conflicts with the current state.' },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  uri_too_long: { status: 414, message: 'The request URL is too long.' },
  plan_limit_reached: { status: 422, message: 'A limit of the workspace plan was reached.' },
  wallet_pending_minimum: { status: 422, message: 'The wallet needs a first deposit of at least 10 dollars.' },
  rate_limited: { status: 429, message: 'Too many requests.' },
  request_header_fields_too_large: { status: 431, message: 'The request headers are too large.' },
  internal_error: { status: 500, message: 'Something went wrong on our side.' },
  generation_paused: { status: 503, message: 'Generation is paused platform-wide.' },
  not_ready: { status: 503, message: 'The service is not ready.' },
  service_unavailable: {
    status: 503,
    message: 'The service cannot serve this request right now (its database is unreachable, or the workspace is moving between nodes); retry shortly.',
  },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;
export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message ?? ERRORS[code].message);
    this.name = 'ApiError';
    this.status = ERRORS[code].status;
  }
}

export function isApiError(error: unknown): error is ApiError {
  return error instanceof ApiError;
}

/**
 * A refusal that names the request field it is about, as OpenAI's errors do (`param`, and their `code`:
 * `unknown_parameter`, `invalid_value`, `model_not_found`…): the OpenAI-compatible door's (docs/openai-compatible.md).
 * Answered in the envelope elsewhere, like any ApiError.
 */
export class ParamError extends ApiError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly param: string | null,
    readonly openAiCode: string | null = null,
    headers?: Record<string, string>,
  ) {
    super(code, message, headers);
    this.name = 'ParamError';
  }
}
