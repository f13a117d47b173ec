/** One kind of event a live stream sends (docs/streaming.md). */
export interface Frame {
  /** `message`, SSE's default type, is written without an `event:` line (the OpenAI-compatible door's chunks). */
  event: 'state' | 'transition' | 'output' | 'end' | 'ready' | 'reset' | 'cutoff' | 'shutdown' | 'message';
  /** SSE `id:` (the client's Last-Event-ID when it reconnects); left out for control events. */
  id?: string;
  /** JSON; text (already serialised, or `[DONE]`) is written as it is. */
  data: Record<string, unknown> | string;
}

/** Where a feed writes: one SSE response, or one subscription of a WebSocket. */
export interface FrameSink {
  /** Sends a frame; a client that cannot keep up is cut off (a `cutoff` frame, then closed) instead. */
  send(frame: Frame): void;
  /** Sends a last frame (if any) and ends the stream (an SSE response) or the subscription (a WebSocket's). */
  end(final?: Frame): void;
  readonly closed: boolean;
  /** Called once when the stream ends, whoever ended it. */
  onClose(listener: () => void): void;
}

/** An open stream as the hub sees it: it can be pinged, and closed at shutdown with a reconnect hint. */
export interface OpenStream {
  ping(): void;
  shutdown(retryMs: number): void;
}

/**
 * The streams open on this node: pinged while idle so that proxies keep them, and closed at shutdown with a
 * reconnect hint. Streams are not requests in flight: the server's idle() does not wait for them.
 */
export class StreamHub {
  private readonly open = new Set<OpenStream>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly pingMs: number) {}

  get size(): number {
    return this.open.size;
  }

  get draining(): boolean {
    return this.stopped;
  }

  add(stream: OpenStream): void {
    if (this.stopped) {
      stream.shutdown(retryHint());
      return;
    }
    this.open.add(stream);
    if (!this.timer) {
      this.timer = setInterval(() => {
        for (const each of this.open) each.ping();
      }, this.pingMs);
      this.timer.unref();
    }
  }

  remove(stream: OpenStream): void {
    this.open.delete(stream);
    if (this.open.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Closes every stream with a reconnect hint, spread over a second so that clients do not all come back at once. */
  shutdown(): void {
    this.stopped = true;
    for (const stream of [...this.open]) stream.shutdown(retryHint());
    this.open.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

function retryHint(): number {
  return 500 + Math.floor(Math.random() * 1000);
}
