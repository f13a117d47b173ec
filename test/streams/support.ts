import { EventSource } from 'eventsource';
import type { TestServer } from '../helpers/server.ts';
import { withKey } from '../helpers/identity.ts';

export interface Received {
  event: string;
  id: string;
  data: any;
}

export const EVENT_NAMES = ['state', 'transition', 'output', 'end', 'ready', 'reset', 'cutoff', 'shutdown'] as const;

/** An EventSource (the `eventsource` package) on the server, with headers on each of its requests, collecting events. */
export function openEventSource(server: TestServer, path: string, headers: Record<string, string>) {
  const events: Received[] = [];
  const errors: Array<{ code?: number; message?: string }> = [];
  let wake: (() => void) | undefined;
  const source = new EventSource(`${server.url}${path}`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } }),
  });
  for (const name of EVENT_NAMES) {
    source.addEventListener(name, (message) => {
      events.push({ event: name, id: message.lastEventId, data: JSON.parse(message.data) });
      wake?.();
    });
  }
  source.addEventListener('error', (error) => {
    errors.push({ code: (error as unknown as { code?: number }).code, message: (error as unknown as { message?: string }).message });
    wake?.();
  });
  return {
    source,
    events,
    errors,
    /** Waits until `done` holds for what was received (generous deadline: the machine is shared). */
    async until(done: () => boolean, what: string, ms = 60_000): Promise<void> {
      const deadline = Date.now() + ms;
      while (!done()) {
        if (Date.now() > deadline)
          throw new Error(`timed out waiting for ${what}; got ${JSON.stringify(events.map((e) => [e.event, e.id]))} errors ${JSON.stringify(errors)}`);
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 200);
        });
      }
    },
    close: () => source.close(),
  };
}

/** Reads a stream with plain fetch until it ends (or `stop` says enough), parsing its events and comments. */
export async function readSse(
  server: TestServer,
  path: string,
  headers: Record<string, string>,
  stop: (events: Received[], text: string) => boolean = () => false,
) {
  const controller = new AbortController();
  const response = await fetch(`${server.url}${path}`, { headers, signal: controller.signal });
  const events: Received[] = [];
  let text = '';
  if (response.status !== 200 || !response.body) return { status: response.status, headers: response.headers, events, text, body: await response.text() };
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body) {
      text += decoder.decode(chunk as Uint8Array, { stream: true });
      events.length = 0;
      events.push(...parseSse(text));
      if (stop(events, text)) {
        controller.abort();
        break;
      }
    }
  } catch (error) {
    if ((error as Error).name !== 'AbortError') throw error;
  }
  return { status: response.status, headers: response.headers, events, text, body: '' };
}

export function parseSse(text: string): Received[] {
  const events: Received[] = [];
  for (const block of text.split('\n\n').slice(0, -1)) {
    let event = 'message';
    let id = '';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    if (data) events.push({ event, id, data: JSON.parse(data) });
  }
  return events;
}

export async function createGeneration(server: TestServer, key: string, workspaceId: string, body: Record<string, unknown> = {}) {
  const created = await server.json<{ id: string; status: string }>('/v1/generations', {
    method: 'POST',
    headers: withKey(key),
    body: JSON.stringify({ workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'Say hello', seed: 7 }, ...body }),
  });
  if (created.status !== 201) throw new Error(`create failed: ${created.status} ${JSON.stringify(created.body)}`);
  return created.body;
}

export const LIFECYCLE = ['queued', 'reserved', 'submitted', 'running', 'succeeded'];
