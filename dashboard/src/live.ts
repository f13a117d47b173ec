import { api, withQuery } from './api.ts';

export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

/** How the page is kept current: the live stream, or polling where the service has no stream. */
export type Via = 'stream' | 'polling';

/** The generation an SSE event carries: the generation itself, or an object holding it. */
function generationOf(data: any): any {
  if (data && typeof data === 'object') {
    if (data.generation && typeof data.generation === 'object') return data.generation;
    if (typeof data.id === 'string' && typeof data.status === 'string') return data;
  }
  return undefined;
}

/**
 * Follows a generation until it ends: GET /v1/generations/:id/stream (Server-Sent Events, read with fetch so
 * its status can be seen); when the service answers that route with an error (a service without the stream
 * answers 404), or the stream stops before the end, GET /v1/generations/:id every second instead.
 */
export function watchGeneration(id: string, workspaceId: string, onUpdate: (generation: any) => void, onVia: (via: Via) => void): () => void {
  const controller = new AbortController();
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let last: any;
  const update = (generation: any) => {
    last = generation;
    onUpdate(generation);
  };

  const poll = async () => {
    if (stopped) return;
    try {
      const generation = await api('GET', `/v1/generations/${encodeURIComponent(id)}`, { query: { workspaceId } });
      update(generation);
      if (TERMINAL.has(generation.status)) return;
    } catch {
      // keep trying: a failed read is shown by the next one that works
    }
    if (!stopped) timer = setTimeout(poll, 1000);
  };
  const startPolling = () => {
    if (stopped) return;
    onVia('polling');
    void poll();
  };

  const stream = async () => {
    const url = withQuery(`/v1/generations/${encodeURIComponent(id)}/stream`, { workspaceId });
    let response: Response;
    try {
      response = await fetch(url, { credentials: 'same-origin', headers: { accept: 'text/event-stream' }, signal: controller.signal });
    } catch {
      return startPolling();
    }
    if (!response.ok || !response.body || !(response.headers.get('content-type') ?? '').includes('text/event-stream')) {
      void response.body?.cancel();
      return startPolling();
    }
    onVia('stream');
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end: number;
        while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
          const data = block
            .split(/\r?\n/)
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).replace(/^ /, ''))
            .join('\n');
          if (data === '') continue;
          try {
            const generation = generationOf(JSON.parse(data));
            if (generation) update(generation);
          } catch {
            // not JSON: nothing to show
          }
        }
      }
    } catch {
      // cut off: polling takes over below
    }
    if (!stopped && !(last && TERMINAL.has(last.status))) startPolling();
  };

  void stream();
  return () => {
    stopped = true;
    controller.abort();
    if (timer) clearTimeout(timer);
  };
}
