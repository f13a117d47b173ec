import { randomBytes } from 'node:crypto';

/** What a client may send as X-Request-Id and have kept: printable, no spaces, at most 128 characters. */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Request ids: `req_` + 32 hex digits, the first 20 random per process (80 bits), the last 12 a counter.
 * Unique (a process never repeats one; two processes share a prefix with negligible probability) and
 * not guessable across processes, but sequential within one: they correlate, they do not authorise.
 */
const REQUEST_ID_PREFIX = `req_${randomBytes(10).toString('hex')}`;
let requestCounter = 0;
export function newRequestId(): string {
  requestCounter = (requestCounter + 1) % 0x1000000000000;
  return REQUEST_ID_PREFIX + requestCounter.toString(16).padStart(12, '0');
}

/** The request's id: the client's X-Request-Id when it is an acceptable one, otherwise a new one. */
export function requestIdOf(headers: Record<string, string>): string {
  const incoming = headers['x-request-id'];
  return incoming && ACCEPTED_REQUEST_ID.test(incoming) ? incoming : newRequestId();
}
