import { SpanStatusCode, type Span } from '@opentelemetry/api';
import type { HttpResponse } from 'uWebSockets.js';
import { ApiError, isApiError } from '../errors.ts';
import { sendError, type ResponseState } from '../respond.ts';
import { openAiErrorBody, openAiErrorOf } from '../openai-errors.ts';
import type { Services } from '../services.ts';
import { ClientGoneError } from './body-reader.ts';
import { workspaceMoving } from './placement.ts';
import { ShardNotOwnedError } from '../../runtime/actor-directory.ts';
import { availabilityOf, DatabaseUnavailableError, isDatabaseUnreachable } from '../../persistence/availability.ts';

/** Seconds a client is asked to wait while the database cannot be reached. */
const DATABASE_RETRY_AFTER_S = '2';

/** The answer while the database cannot be reached: 503 with Retry-After. */
export function databaseUnavailable(): ApiError {
  return new ApiError('service_unavailable', 'The service cannot reach its database; retry shortly.', { 'Retry-After': DATABASE_RETRY_AFTER_S });
}

/** The request an error ended, and what its answer and its span record of it. */
export interface FailedRequest {
  readonly res: HttpResponse;
  readonly state: ResponseState;
  readonly requestId: string;
  readonly routeLabel: string;
  readonly span: Span | undefined;
  /** Headers every answer carries once the caller is known (the X-RateLimit-* of a key). */
  readonly authHeaders: Record<string, string> | undefined;
  status: number | undefined;
  errorType: string | undefined;
  /** Whether a streamed body was left unread (the connection is then closed). */
  unreadBody(): boolean;
  /** Whether errors are answered in OpenAI's shape (the OpenAI-compatible door). */
  readonly openAi: boolean;
}

/**
 * Turns any error into its answer, in the one envelope: an ApiError with its status; the database out of
 * reach 503; anything else 500 internal_error, whose detail goes to the log and the span, never the client.
 */
export function answerFailure(request: FailedRequest, services: Services, error: unknown): void {
  const requestId = request.requestId;
  if (error instanceof ClientGoneError) return;
  if (error instanceof ShardNotOwnedError) {
    // Cluster mode: the workspace moved to another node while this request was being served here.
    error = workspaceMoving();
  }
  // The database could not be reached (here, or by an actor on this request's behalf), or a request that
  // needed it failed while it is known to be down: 503, not 500.
  const unreachable = isDatabaseUnreachable(error);
  if (unreachable) availabilityOf(services.db).down(error);
  if (!isApiError(error) && (unreachable || error instanceof DatabaseUnavailableError || !availabilityOf(services.db).available)) {
    services.logger.warn({ err: error, route: request.routeLabel }, 'request failed: the database cannot be reached');
    error = databaseUnavailable();
  }
  if (isApiError(error)) {
    request.status = error.status;
    // After refusing an oversized body the rest of it is not read, so the connection cannot be reused.
    const headers = request.authHeaders ? { ...request.authHeaders, ...error.headers } : error.headers;
    const close = error.code === 'payload_too_large' || request.unreadBody();
    sendError(request.res, request.state, requestId, error.code, error.message, headers, close, request.openAi ? openAiErrorOf(error) : undefined);
    return;
  }
  request.span?.recordException(error as Error);
  request.span?.setStatus({ code: SpanStatusCode.ERROR });
  request.status = 500;
  request.errorType = (error as Error | undefined)?.name || 'Error';
  services.logger.error({ err: error, route: request.routeLabel }, 'request failed');
  const message = `Something went wrong on our side. Quote request id ${requestId} when reporting it.`;
  sendError(
    request.res,
    request.state,
    requestId,
    'internal_error',
    message,
    request.authHeaders,
    request.unreadBody(),
    request.openAi ? openAiErrorBody('internal_error', message) : undefined,
  );
}
