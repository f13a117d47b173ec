import type { HttpResponse } from 'uWebSockets.js';
import { ApiError } from '../errors.ts';
import type { ResponseState } from '../respond.ts';
import type { CompiledRoute } from '../router.ts';
import { parseJson } from './json.ts';

/** Methods whose route, when it has a body schema, requires a body unless it declares it optional. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The client closed the connection before its body arrived: there is no one to answer. */
export class ClientGoneError extends Error {}

/** The request whose body is read: its response (uWS delivers the body there) and where the bytes are kept. */
export interface BodyReading {
  readonly res: HttpResponse;
  readonly state: ResponseState;
  /** The bytes of a body read whole (a JSON route's), which a forwarded request's signature covers. */
  receivedBody: Buffer | undefined;
}

/** Whether the request announces a body: chunked, or a Content-Length other than 0. */
export function hasBody(headers: Record<string, string>): boolean {
  const declared = headers['content-length'];
  const chunked = (headers['transfer-encoding'] ?? '').toLowerCase().includes('chunked');
  return chunked || (declared !== undefined && declared !== '0');
}

/**
 * Reads the body for methods that carry one: size limit first, then Content-Type and JSON. Undefined
 * when there is nothing to wait for: no body, or a GET/HEAD, whose body (if any) no route reads.
 * It must start before the request's first await: uWS drops chunks that arrive before onData is set.
 */
export function readBody(
  request: BodyReading,
  route: CompiledRoute,
  method: string,
  headers: Record<string, string>,
  limit: number,
): Promise<unknown> | undefined {
  if (method === 'GET' || method === 'HEAD') return undefined;
  const declared = headers['content-length'];
  if (!hasBody(headers)) {
    if (route.validateBody && BODY_METHODS.has(method) && !route.def.bodyOptional) {
      return Promise.reject(new ApiError('validation_error', 'A JSON request body is required.'));
    }
    return undefined;
  }
  if (declared !== undefined && (!/^\d+$/.test(declared) || Number(declared) > limit)) {
    return Promise.reject(new ApiError('payload_too_large', `The request body must be at most ${limit} bytes.`));
  }
  return new Promise((resolve, reject) => {
    request.state.onAbort = () => reject(new ClientGoneError());
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    request.res.onData((chunk, isLast) => {
      if (done) return;
      size += chunk.byteLength;
      if (size > limit) {
        done = true;
        reject(new ApiError('payload_too_large', `The request body must be at most ${limit} bytes.`));
        return;
      }
      // uWS reuses the chunk's memory after this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (!isLast) return;
      done = true;
      const received = Buffer.concat(chunks, size);
      request.receivedBody = received;
      try {
        resolve(route.validateBody ? parseJson(received, headers['content-type']) : undefined);
      } catch (error) {
        reject(error);
      }
    });
  });
}
