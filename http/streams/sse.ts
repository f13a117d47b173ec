import type { ServerResponse } from 'node:http';
import type { HttpResponse } from 'uWebSockets.js';
import type { ResponseState } from '../respond.ts';
import { fallbackResponse, onFallback } from '../uws.ts';
import type { Frame, FrameSink, OpenStream, StreamHub } from './hub.ts';

/** The reconnect delay every stream announces first (SSE `retry:`), in ms. */
export const RETRY_MS = 2_000;

export function renderFrame(frame: Frame): string {
  const id = frame.id === undefined ? '' : `id: ${frame.id}\n`;
  const event = frame.event === 'message' ? '' : `event: ${frame.event}\n`;
  return `${id}${event}data: ${typeof frame.data === 'string' ? frame.data : JSON.stringify(frame.data)}\n\n`;
}

/**
 * One Server-Sent Events response. Frames are written as they come while the socket takes them; while it
 * does not, they wait in a queue of at most `maxBufferBytes`, and a reader that lets it fill up is cut off:
 * a `cutoff` frame (it resumes with Last-Event-ID), then the end of the response. On the native addon the
 * socket's own buffer is uWS's (write() returns false once it holds anything); on the pure-Node fallback,
 * Node's (write() returns false past its high-water mark, 'drain' when emptied).
 */
export class SseConnection implements FrameSink, OpenStream {
  private queue: string[] = [];
  private queued = 0;
  private blocked = false;
  private ended = false;
  private closeListeners: Array<() => void> = [];
  private readonly node: ServerResponse | undefined;

  constructor(
    private readonly res: HttpResponse,
    private readonly state: ResponseState,
    private readonly hub: StreamHub,
    private readonly maxBufferBytes: number,
  ) {
    this.node = onFallback ? fallbackResponse(res) : undefined;
  }

  get closed(): boolean {
    return this.ended || this.state.aborted;
  }

  /** Writes the head and the first reconnect hint; the stream is then the hub's until it ends. */
  start(requestId: string, headers: Record<string, string> | undefined): void {
    this.state.finished = true;
    this.state.onAbort = () => this.gone();
    const head: Record<string, string> = {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      'X-Accel-Buffering': 'no',
      'X-Request-Id': requestId,
      ...headers,
    };
    const opening = `retry: ${RETRY_MS}\n\n`;
    if (this.node) {
      this.node.on('close', () => this.gone());
      this.node.on('drain', () => this.drain());
      this.node.writeHead(200, head);
      this.node.flushHeaders();
      this.write(opening);
    } else {
      this.res.cork(() => {
        this.res.writeStatus('200 OK');
        for (const name in head) this.res.writeHeader(name, head[name]!);
        this.blocked = !this.res.write(opening);
      });
      this.res.onWritable(() => {
        this.drain();
        return !this.blocked;
      });
    }
    this.hub.add(this);
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.closeListeners.push(listener);
  }

  send(frame: Frame): void {
    this.write(renderFrame(frame));
  }

  end(final?: Frame): void {
    if (this.closed) return;
    if (final) this.write(renderFrame(final));
    if (this.closed) return;
    this.finish(false);
  }

  ping(): void {
    if (!this.blocked) this.write(': ping\n\n');
  }

  shutdown(retryMs: number): void {
    if (this.closed) return;
    this.writeNow(
      `retry: ${retryMs}\n${renderFrame({ event: 'shutdown', data: { reason: 'The node is shutting down; reconnect with Last-Event-ID.', retryMs } })}`,
    );
    this.finish(true);
  }

  private write(text: string): void {
    if (this.closed) return;
    if (this.blocked || this.queue.length > 0) {
      this.queue.push(text);
      this.queued += text.length;
      if (this.queued > this.maxBufferBytes) this.cutOff();
      return;
    }
    this.writeNow(text);
  }

  private writeNow(text: string): void {
    if (this.node) {
      this.blocked = !this.node.write(text);
      return;
    }
    this.res.cork(() => {
      this.blocked = !this.res.write(text);
    });
  }

  private drain(): void {
    this.blocked = false;
    while (this.queue.length > 0 && !this.blocked && !this.closed) {
      const text = this.queue.shift()!;
      this.queued -= text.length;
      this.writeNow(text);
    }
  }

  private cutOff(): void {
    this.queue = [];
    this.queued = 0;
    this.writeNow(
      renderFrame({
        event: 'cutoff',
        data: {
          reason: 'slow_reader',
          message: `The client read too slowly: more than ${this.maxBufferBytes} bytes of events waited. Reconnect with Last-Event-ID.`,
        },
      }),
    );
    this.finish(true);
  }

  private finish(closeConnection: boolean): void {
    if (this.ended) return;
    this.ended = true;
    // What is still queued goes with the end (a bounded amount, the reader's own).
    const rest = this.queue.join('');
    this.queue = [];
    this.queued = 0;
    if (!this.state.aborted) {
      if (this.node) {
        this.node.end(rest);
        if (closeConnection) this.node.once('finish', () => this.node!.socket?.end());
      } else {
        // Not end(rest, true): once the head went, uWS would write its Connection: close into the chunked body.
        // A reader that never takes the end is dropped by uWS's own idle timeout of keep-alive connections.
        this.res.cork(() => this.res.end(rest));
      }
    }
    this.released();
  }

  private gone(): void {
    this.ended = true;
    this.queue = [];
    this.queued = 0;
    this.released();
  }

  private released(): void {
    this.hub.remove(this);
    const listeners = this.closeListeners;
    this.closeListeners = [];
    for (const listener of listeners) listener();
  }
}
