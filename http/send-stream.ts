import type { Readable } from 'node:stream';
import type { HttpResponse } from 'uWebSockets.js';
import { statusLine, type ResponseState } from './respond.ts';
import { endWithoutBody, fallbackResponse, onFallback } from './uws.ts';

/**
 * Streams a response body of known length with backpressure: each chunk goes out with tryEnd, and when
 * the socket's buffer is full the source waits for onWritable. Stops if the client goes away.
 */
export async function sendStream(
  res: HttpResponse,
  state: ResponseState,
  status: number,
  requestId: string,
  source: Readable,
  length: number,
  headers: Record<string, string>,
): Promise<void> {
  if (state.aborted || state.finished) {
    source.destroy();
    return;
  }
  state.finished = true;
  state.status = status;
  let wake: (() => void) | undefined;
  state.onAbort = () => {
    source.destroy();
    wake?.();
  };
  res.cork(() => {
    res.writeStatus(statusLine(status));
    res.writeHeader('X-Request-Id', requestId);
    for (const name in headers) res.writeHeader(name, headers[name]!);
  });
  if (length === 0) {
    source.destroy();
    res.cork(() => endWithoutBody(res));
    return;
  }
  if (onFallback) return sendStreamOnFallback(res, state, source, length);
  try {
    for await (const data of source) {
      if (state.aborted) return;
      const chunk = data as Buffer;
      const start = res.getWriteOffset();
      let ok = false;
      let done = false;
      res.cork(() => {
        [ok, done] = res.tryEnd(chunk, length);
      });
      if (done) return;
      if (ok) continue;
      // Not all of the chunk went out: send the rest each time the socket can take more.
      await new Promise<void>((resolve) => {
        wake = resolve;
        res.onWritable((offset) => {
          if (state.aborted) {
            resolve();
            return true;
          }
          const rest = chunk.subarray(offset - start);
          let wrote = false;
          let finished = false;
          [wrote, finished] = res.tryEnd(rest, length);
          if (wrote || finished) resolve();
          return wrote;
        });
      });
      wake = undefined;
      if (state.aborted) return;
    }
  } finally {
    source.destroy();
  }
  // The source held fewer bytes than announced: the response cannot be completed, so the connection goes.
  if (!state.aborted) res.cork(() => res.close());
}

/** The pure-Node fallback has no tryEnd/onWritable: write to the Node response it wraps, waiting for drain. */
async function sendStreamOnFallback(res: HttpResponse, state: ResponseState, source: Readable, length: number): Promise<void> {
  const response = fallbackResponse(res);
  response.setHeader('Content-Length', String(length));
  let sent = 0;
  try {
    for await (const data of source) {
      if (state.aborted) return;
      const chunk = data as Buffer;
      sent += chunk.length;
      if (!response.write(chunk))
        await new Promise<void>((resolve) => {
          response.once('drain', resolve);
          response.once('close', resolve);
        });
    }
  } finally {
    source.destroy();
  }
  if (state.aborted) return;
  if (sent === length) response.end();
  else res.close();
}
