import { PROVIDER_ERROR_CODES, ProviderFailure } from '../adapter.ts';

const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

export interface StreamLimits {
  /** Bytes of the whole answer (every chunk of a stream together). */
  maxBytes: number;
  /** Longest wait for the headers, and between two pieces of the body. */
  idleMs: number;
}

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * A fetch for the openai client's streamed calls (chat completions with `stream: true`). Unlike
 * boundedFetch, which reads an answer whole before the client parses it, this hands the body over as it
 * flows (nothing is read ahead of the reader) and bounds it as it flows:
 * - past `maxBytes` in all, the body errors with provider_bad_response and the connection is closed;
 * - no headers within `idleMs`, or a gap of `idleMs` between two pieces: provider_timeout.
 * The whole stream ends at the job's deadline, which is the follower's (providers/follower.ts): it aborts the
 * call then. A connection that breaks mid-body (reset, closed before the end of a chunked body) errors it
 * with provider_unavailable. The caller's own abort (the client's signal: a cancel, the deadline) passes
 * through as the AbortError it is, which the client's stream takes as a quiet end.
 */
export function streamingFetch(limits: StreamLimits): Fetch {
  return async (input, init) => {
    const ours = new AbortController();
    const signal = init?.signal ? AbortSignal.any([init.signal, ours.signal]) : ours.signal;
    let failure: ProviderFailure | undefined;
    let out: ReadableStreamDefaultController<Uint8Array> | undefined;
    let idle: NodeJS.Timeout | undefined;
    const clear = () => clearTimeout(idle);
    const fail = (reason: ProviderFailure) => {
      if (failure) return;
      failure = reason;
      clear();
      out?.error(reason);
      ours.abort(reason);
    };
    const resetIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => fail(new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The provider sent nothing for ${limits.idleMs} ms.`)), limits.idleMs);
    };
    const tooLarge = () => new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The provider's answer is larger than ${limits.maxBytes} bytes.`);
    // The caller's abort ends the call: no timer of ours outlives it.
    init?.signal?.addEventListener('abort', clear, { once: true });
    resetIdle();

    let response: Response;
    try {
      response = await fetch(input, { ...init, signal });
    } catch (error) {
      clear();
      throw failure ?? error;
    }
    const declared = Number(response.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > limits.maxBytes) {
      clear();
      await response.body?.cancel().catch(() => undefined);
      throw tooLarge();
    }
    if (!response.body || NULL_BODY_STATUSES.has(response.status)) {
      clear();
      return response;
    }
    resetIdle();
    const reader = response.body.getReader();
    let read = 0;
    const body = new ReadableStream<Uint8Array>(
      {
        start(controller) {
          out = controller;
          if (failure) controller.error(failure);
        },
        async pull(controller) {
          try {
            const { done, value } = await reader.read();
            if (failure) return;
            if (done) {
              clear();
              controller.close();
              return;
            }
            read += value.byteLength;
            if (read > limits.maxBytes) return fail(tooLarge());
            resetIdle();
            controller.enqueue(value);
          } catch (error) {
            if (failure) return;
            clear();
            if (init?.signal?.aborted) controller.error(error);
            else controller.error(new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, `The connection to the provider broke mid-answer: ${describe(error)}`));
          }
        },
        cancel(reason) {
          clear();
          return reader.cancel(reason).catch(() => undefined);
        },
      },
      // Nothing read ahead: a byte is taken from the connection only when the client asks for one.
      { highWaterMark: 0 },
    );
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.cause instanceof Error ? `${error.message} (${error.cause.message})` : error.message;
}
