import { Readable } from 'node:stream';
import type { HttpResponse } from 'uWebSockets.js';
import type { ResponseState } from '../respond.ts';
import { onFallback } from '../uws.ts';

/**
 * A request body as a Node stream, for routes declared with `rawBody: 'stream'` (uploads). uWS cannot be
 * asked for data, only paused: when the consumer stops reading (push returns false) the socket is paused,
 * and resumed when it asks for more, so a slow disk slows the client instead of filling memory.
 * It must be made before the first await of the request: uWS drops chunks that arrive before onData is set.
 */
export class RequestBodyStream extends Readable {
  private paused = false;
  /** Every byte of the body was received (so the connection can serve another request). */
  complete = false;
  received = 0;

  constructor(
    private readonly res: HttpResponse,
    hasBody: boolean,
    state: ResponseState,
    gone: () => Error,
  ) {
    super({ highWaterMark: 256 * 1024 });
    state.onAbort = () => this.destroy(gone());
    if (!hasBody) {
      this.complete = true;
      this.push(null);
      return;
    }
    res.onData((chunk, isLast) => {
      if (this.destroyed) return;
      this.received += chunk.byteLength;
      // uWS reuses the chunk's memory after this callback returns: copy it.
      const more = this.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) {
        this.complete = true;
        this.push(null);
      } else if (!more && !this.paused && !onFallback) {
        this.paused = true;
        res.pause();
      }
    });
  }

  override _read(): void {
    if (this.paused) {
      this.paused = false;
      this.res.resume();
    }
  }

  /** Before answering: a paused socket is resumed so the answer (and the close) goes out. */
  release(): void {
    if (this.paused) {
      this.paused = false;
      this.res.resume();
    }
  }
}
