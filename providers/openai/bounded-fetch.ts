import { PROVIDER_ERROR_CODES, ProviderFailure } from '../adapter.ts';

const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/**
 * A fetch for the openai client that reads the whole answer before handing it over: at most `maxBytes`,
 * within `timeoutMs` from the request to the last byte (the client's own timeout stops at the headers).
 * Going over either throws a ProviderFailure, which the client passes on as its error's `cause`.
 */
export function boundedFetch(maxBytes: number, timeoutMs: number): (input: string | URL | Request, init?: RequestInit) => Promise<Response> {
  return async (input, init) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    const timedOut = () => timeout.aborted && !init?.signal?.aborted;
    const timeoutFailure = () => new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The provider did not answer within ${timeoutMs} ms.`);
    const tooLarge = () => new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The provider's answer is larger than ${maxBytes} bytes.`);
    let response: Response;
    try {
      response = await fetch(input, { ...init, signal });
    } catch (error) {
      throw timedOut() ? timeoutFailure() : error;
    }
    const declared = Number(response.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > maxBytes) {
      await response.body?.cancel().catch(() => undefined);
      throw tooLarge();
    }
    const chunks: Uint8Array[] = [];
    let total = 0;
    if (response.body) {
      const reader = response.body.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          total += value.byteLength;
          if (total > maxBytes) {
            await reader.cancel().catch(() => undefined);
            throw tooLarge();
          }
          chunks.push(value);
        }
      } catch (error) {
        if (error instanceof ProviderFailure) throw error;
        throw timedOut() ? timeoutFailure() : error;
      }
    }
    const body = NULL_BODY_STATUSES.has(response.status) ? null : Buffer.concat(chunks);
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
