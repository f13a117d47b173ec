import type { HttpResponse } from 'uWebSockets.js';
import { statusLine, type ResponseState } from './respond.ts';
import { fallbackResponse, onFallback } from './uws.ts';

/**
 * Streams a body of unknown length (chunked transfer encoding) with backpressure: each chunk is written as it
 * is made, and when the socket's buffer holds data the source waits for it to drain. Stops if the client
 * goes away. For exports built row by row (GET /v1/usage/series as CSV).
 */
export async function sendChunked(
  res: HttpResponse,
  state: ResponseState,
  status: number,
  requestId: string,
  source: AsyncIterable<string>,
  headers: Record<string, string>,
): Promise<void> {
  if (state.aborted || state.finished) return;
  state.finished = true;
  state.status = status;
  let wake: (() => void) | undefined;
  state.onAbort = () => wake?.();
  if (onFallback) {
    const response = fallbackResponse(res);
    response.writeHead(status, { ...headers, 'X-Request-Id': requestId });
    for await (const chunk of source) {
      if (state.aborted) return;
      if (!response.write(chunk))
        await new Promise<void>((resolve) => {
          response.once('drain', resolve);
          response.once('close', resolve);
        });
    }
    if (!state.aborted) response.end();
    return;
  }
  res.cork(() => {
    res.writeStatus(statusLine(status));
    res.writeHeader('X-Request-Id', requestId);
    for (const name in headers) res.writeHeader(name, headers[name]!);
  });
  for await (const chunk of source) {
    if (state.aborted) return;
    let ok = true;
    res.cork(() => {
      ok = res.write(chunk);
    });
    if (ok) continue;
    // uWS keeps what it could not send; wait until the socket took it before making more.
    await new Promise<void>((resolve) => {
      wake = resolve;
      res.onWritable(() => {
        resolve();
        return true;
      });
    });
    wake = undefined;
    if (state.aborted) return;
  }
  if (!state.aborted) res.cork(() => res.end());
}
