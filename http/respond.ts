import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from 'uWebSockets.js';
import { ERRORS, type ErrorCode } from './errors.ts';
import { endWithoutBody } from './uws.ts';

const statusLines = new Map<number, string>();
export function statusLine(status: number): string {
  let line = statusLines.get(status);
  if (!line) {
    line = `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
    statusLines.set(status, line);
  }
  return line;
}

/** Per-request response state: whether the client went away and whether we already answered. */
export interface ResponseState {
  aborted: boolean;
  finished: boolean;
  /** Called once if the client goes away, so a pending body read can give up. */
  onAbort?: () => void;
  /** The status answered, once the answer has started (metrics). */
  status?: number;
}

/** Writes one complete response; does nothing once the client has gone or an answer was sent. */
export function send(
  res: HttpResponse,
  state: ResponseState,
  status: number,
  requestId: string,
  body: string | undefined,
  headers?: Record<string, string>,
  closeConnection = false,
  /** More headers (the caller's X-RateLimit-*), written before `headers`, which should not repeat them. */
  callerHeaders?: Record<string, string>,
): void {
  if (state.aborted || state.finished) return;
  state.finished = true;
  state.status = status;
  res.cork(() => {
    res.writeStatus(statusLine(status));
    res.writeHeader('X-Request-Id', requestId);
    if (body !== undefined) res.writeHeader('Content-Type', 'application/json; charset=utf-8');
    if (callerHeaders) for (const name in callerHeaders) res.writeHeader(name, callerHeaders[name]!);
    if (headers) for (const name in headers) res.writeHeader(name, headers[name]!);
    if (body === undefined) endWithoutBody(res, closeConnection);
    else res.end(body, closeConnection);
  });
}

/** The one rendering of every error: `{error:{code,message,requestId}}` with the registry's status. */
export function errorBody(code: ErrorCode, message: string, requestId: string): string {
  return JSON.stringify({ error: { code, message, requestId } });
}

export function sendError(
  res: HttpResponse,
  state: ResponseState,
  requestId: string,
  code: ErrorCode,
  message: string = ERRORS[code].message,
  headers?: Record<string, string>,
  closeConnection = false,
  /** The body already rendered in another shape (the OpenAI-compatible door's). */
  body: string = errorBody(code, message, requestId),
): void {
  send(res, state, ERRORS[code].status, requestId, body, headers, closeConnection);
}
