import { Agent, WebSocket } from 'undici';
import { isObject } from './history.ts';

/**
 * ComfyUI's progress socket, `/ws?clientId=<client_id>`: JSON text messages `{ type, data }` for the prompts
 * that client submitted (status, execution_start, executing, progress, executed, execution_success,
 * execution_error, execution_interrupted) and binary preview frames, which are ignored. A server sends a
 * prompt's messages to the socket open under its client_id at that moment, so reopening with the same id
 * (after a drop, or in another process) picks them up again. Nothing here decides a job's outcome: the
 * history does.
 */
export interface SocketMessage {
  type: string;
  data: Record<string, unknown>;
}

export interface ProgressSocket {
  close(): void;
}

export function socketUrl(baseUrl: string, clientId: string): string {
  const url = new URL(`${baseUrl}/ws`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('clientId', clientId);
  return url.toString();
}

/** A dispatcher for sockets: connect bounded in time, each message bounded in size. */
export function socketAgent(connectTimeoutMs: number, maxMessageBytes: number): Agent {
  return new Agent({ connectTimeout: connectTimeoutMs, webSocket: { maxPayloadSize: maxMessageBytes } });
}

export function openProgressSocket(
  options: { baseUrl: string; clientId: string; apiKey?: string; dispatcher: Agent },
  onMessage: (message: SocketMessage) => void,
  onClose: () => void,
): ProgressSocket {
  const headers: Record<string, string> = {};
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  let closed = false;
  let socket: WebSocket;
  try {
    socket = new WebSocket(socketUrl(options.baseUrl, options.clientId), { headers, dispatcher: options.dispatcher });
  } catch {
    queueMicrotask(onClose);
    return { close() {} };
  }
  socket.binaryType = 'arraybuffer';
  socket.addEventListener('message', (event) => {
    if (closed || typeof event.data !== 'string') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(event.data);
    } catch {
      return; // a garbled frame tells nothing; the history still will
    }
    if (isObject(parsed) && typeof parsed.type === 'string' && isObject(parsed.data)) onMessage({ type: parsed.type, data: parsed.data });
  });
  // An error is always followed by close; only close is acted on.
  socket.addEventListener('error', () => undefined);
  socket.addEventListener('close', () => {
    if (closed) return;
    closed = true;
    onClose();
  });
  return {
    close() {
      if (closed) return;
      closed = true;
      try {
        socket.close();
      } catch {
        // already closing
      }
    },
  };
}
