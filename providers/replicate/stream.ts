import { StringDecoder } from 'node:string_decoder';
import { Agent, request, type Dispatcher } from 'undici';

/**
 * A prediction's stream of server-sent events (https://replicate.com/docs/topics/predictions/streaming):
 * a language model's prediction carries `urls.stream`, an SSE endpoint that sends `event: output` with
 * each piece of text (plain text, possibly over several `data:` lines), `event: logs`, `event: error` with
 * JSON, and a last `event: done` with JSON (`{}`, or a `reason` such as `canceled`). It is read as
 * Replicate's own clients read it: GET with `Accept: text/event-stream` and `Cache-Control: no-store`
 * (replicate-python's stream.py; replicate-javascript 1.4.0 lib/stream.js), parsed by the rules of the
 * HTML standard's event-stream format (as the vendored eventsource-parser of that client does).
 *
 * The stream only adds deltas: the job's outcome comes from the prediction itself (its webhook or its poll),
 * so `readStream` never throws, and whatever ends the stream (done, an error event, a refusal, a broken
 * connection, the byte bound, an abort) is returned as data.
 */
export type StreamEnd =
  /** `event: done` came; `reason` is its data's, when it has one (`canceled`, `error`). */
  | { how: 'done'; reason?: string }
  /** `event: error` came (its data is JSON `{ "detail": ... }`); the stream is over for us. */
  | { how: 'error'; detail: string }
  /** The answer was not a stream (a status other than 2xx, another content type). */
  | { how: 'refused'; detail: string }
  /** More than `maxBytes` came: the connection was closed there. */
  | { how: 'cut' }
  /** The connection failed or ended without `done`. */
  | { how: 'broken'; detail: string }
  /** Our own abort (the job ended or was cancelled, the adapter closed). */
  | { how: 'aborted' };

export interface StreamRequest {
  url: string;
  headers: Record<string, string>;
  /** Bound on the connection and on the answer's headers; the body may then idle as long as the model does. */
  timeoutMs: number;
  /** Bytes read in all, counted as they flow; past them the connection is closed ('cut'). */
  maxBytes: number;
  signal: AbortSignal;
  /** Each `output` event's data, as it is parsed. */
  onOutput(text: string): void;
}

const agents = new Map<number, Agent>();

// As upstream-http.ts's agents, except the body's idle bound: a model may think (or boot) for minutes
// between two pieces; the stream lives as long as its job is followed and is closed with it.
function agentFor(timeoutMs: number): Agent {
  let agent = agents.get(timeoutMs);
  if (!agent) {
    agent = new Agent({ connectTimeout: Math.min(timeoutMs, 10_000), headersTimeout: timeoutMs, bodyTimeout: 0 });
    agents.set(timeoutMs, agent);
  }
  return agent;
}

/** Reads a prediction's stream to its end, reporting each output event; resolves with how it ended, never rejects. */
export async function readStream(options: StreamRequest): Promise<StreamEnd> {
  if (options.signal.aborted) return { how: 'aborted' };
  let response: Dispatcher.ResponseData;
  try {
    response = await request(options.url, {
      dispatcher: agentFor(options.timeoutMs),
      method: 'GET',
      headers: { accept: 'text/event-stream', 'cache-control': 'no-store', ...options.headers },
      signal: options.signal,
    });
  } catch (error) {
    return options.signal.aborted ? { how: 'aborted' } : { how: 'broken', detail: describe(error) };
  }
  const body = response.body;
  // A body we stop reading is destroyed; its late errors mean nothing to us.
  body.on('error', () => undefined);
  const contentType = String(response.headers['content-type'] ?? '');
  if (response.statusCode < 200 || response.statusCode > 299 || !/^text\/event-stream\s*(;|$)/i.test(contentType)) {
    body.destroy();
    return { how: 'refused', detail: `the stream answered ${response.statusCode} (${contentType || 'no content type'})` };
  }
  let end: StreamEnd | undefined;
  const parser = new EventStreamParser((event) => {
    if (end) return;
    if (event.type === 'output') options.onOutput(event.data);
    else if (event.type === 'error') end = { how: 'error', detail: errorDetail(event.data) };
    else if (event.type === 'done') end = { how: 'done', ...doneReason(event.data) };
  });
  let received = 0;
  try {
    for await (const chunk of body) {
      const bytes = chunk as Buffer;
      const room = options.maxBytes - received;
      received += bytes.length;
      // What fits in the bound is still read: every event complete within it is reported.
      parser.feed(bytes.length > room ? bytes.subarray(0, Math.max(0, room)) : bytes);
      if (!end && received > options.maxBytes) end = { how: 'cut' };
      if (end) break;
    }
  } catch (error) {
    end ??= options.signal.aborted ? { how: 'aborted' } : { how: 'broken', detail: describe(error) };
  } finally {
    body.destroy();
  }
  if (options.signal.aborted && (!end || end.how === 'broken')) return { how: 'aborted' };
  return end ?? { how: 'broken', detail: 'the stream ended without a done event' };
}

function describe(error: unknown): string {
  return (error as Error)?.message ?? String(error);
}

function errorDetail(data: string): string {
  try {
    const json = JSON.parse(data) as { detail?: unknown };
    if (typeof json?.detail === 'string') return json.detail;
  } catch {
    // Not JSON: the text itself.
  }
  return data;
}

function doneReason(data: string): { reason?: string } {
  try {
    const json = JSON.parse(data) as { reason?: unknown };
    if (typeof json?.reason === 'string' && json.reason !== '') return { reason: json.reason };
  } catch {
    // `done` with data that is not JSON is still the end.
  }
  return {};
}

export interface StreamEvent {
  /** The `event` field, `message` when absent. */
  type: string;
  data: string;
  /** The last event id seen (`id` field), '' when none. */
  id: string;
}

/**
 * An incremental parser of `text/event-stream` (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
 * UTF-8, decoded across chunk boundaries; lines end in CRLF, LF or CR; a leading BOM is dropped; a line
 * starting with `:` is a comment; `field: value` loses one space after the colon; `data` lines are joined
 * with LF; a blank line dispatches the event (none when no `data` line came); `retry` and unknown fields
 * are ignored.
 */
export class EventStreamParser {
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';
  private started = false;
  /** A CR ended the last line: an LF right after it belongs to that line ending. */
  private afterCr = false;
  private type = '';
  private data: string[] = [];
  private lastId = '';

  constructor(private readonly dispatch: (event: StreamEvent) => void) {}

  feed(chunk: Buffer | string): void {
    let text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    if (!this.started && text !== '') {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.afterCr && text !== '') {
      this.afterCr = false;
      if (text.startsWith('\n')) text = text.slice(1);
    }
    if (text === '') return;
    this.buffer += text;
    let start = 0;
    for (;;) {
      const lf = this.buffer.indexOf('\n', start);
      const cr = this.buffer.indexOf('\r', start);
      if (lf < 0 && cr < 0) break;
      const at = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      const line = this.buffer.slice(start, at);
      if (this.buffer[at] === '\r') {
        if (at + 1 === this.buffer.length) {
          // The LF of a CRLF may come in the next chunk.
          this.afterCr = true;
          start = at + 1;
          this.line(line);
          break;
        }
        start = this.buffer[at + 1] === '\n' ? at + 2 : at + 1;
      } else {
        start = at + 1;
      }
      this.line(line);
    }
    this.buffer = this.buffer.slice(start);
  }

  private line(line: string): void {
    if (line === '') return this.flush();
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.type = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.lastId = value;
  }

  private flush(): void {
    const { type, data } = this;
    this.type = '';
    this.data = [];
    if (data.length === 0) return;
    this.dispatch({ type: type || 'message', data: data.join('\n'), id: this.lastId });
  }
}

/**
 * Whether a prediction's `urls.stream` may be opened: on the API's own host or a subdomain of it
 * (api.replicate.com hands out streaming.api.replicate.com), by https or by the API's own scheme, without
 * credentials. The egress guard's fetch (`fetchOutput`) reads answers whole, so a stream cannot go through
 * it; a stream is therefore held to the trust of the operator-configured base URL, and a URL anywhere else
 * is not opened (the job still ends by its prediction, without deltas).
 */
export function streamUrlAllowed(streamUrl: string, baseUrl: string): boolean {
  let url: URL;
  let base: URL;
  try {
    url = new URL(streamUrl);
    base = new URL(baseUrl);
  } catch {
    return false;
  }
  if (url.username !== '' || url.password !== '') return false;
  if (url.protocol !== 'https:' && url.protocol !== base.protocol) return false;
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false;
  return url.host === base.host || url.hostname.endsWith(`.${base.hostname}`);
}
