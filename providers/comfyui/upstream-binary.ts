import { Agent, request, type Dispatcher } from 'undici';
import { readLimited } from '../../runtime/read-limited.ts';
import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage } from '../adapter.ts';
import type { UpstreamRequest, UpstreamResponse } from '../upstream-http.ts';

/**
 * requestUpstream for a binary answer (an output file from `/view`): the same bounds in time and size and
 * the same failures, with the body kept as bytes (requestUpstream decodes it as UTF-8, which mangles
 * images). `text` is left empty.
 */
const agents = new Map<number, Agent>();

function agentFor(timeoutMs: number): Agent {
  let agent = agents.get(timeoutMs);
  if (!agent) {
    agent = new Agent({ connectTimeout: Math.min(timeoutMs, 10_000), headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    agents.set(timeoutMs, agent);
  }
  return agent;
}

export async function requestBinary(url: string, options: UpstreamRequest): Promise<UpstreamResponse & { bytes: Buffer }> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let response: Dispatcher.ResponseData;
  try {
    response = await request(url, {
      dispatcher: agentFor(options.timeoutMs),
      method: options.method,
      headers: options.headers,
      body: options.body as Dispatcher.RequestOptions['body'],
      signal,
    });
  } catch (error) {
    throw networkFailure(error, timeout.aborted, options.timeoutMs);
  }
  let bytes: Buffer;
  try {
    bytes = await readLimited(
      response.body,
      options.maxBytes,
      () => new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The provider's answer is larger than ${options.maxBytes} bytes.`),
    );
  } catch (error) {
    if (error instanceof ProviderFailure) throw error;
    throw networkFailure(error, timeout.aborted, options.timeoutMs);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers)) {
    if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return { status: response.statusCode, headers, text: '', json: undefined, bytes };
}

function networkFailure(error: unknown, timedOut: boolean, timeoutMs: number): ProviderFailure {
  const name = (error as { name?: string }).name ?? '';
  const code = (error as { code?: string }).code ?? '';
  if (timedOut || name === 'TimeoutError' || /TIMEOUT/.test(code)) {
    return new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The provider did not answer within ${timeoutMs} ms.`);
  }
  return new ProviderFailure(
    PROVIDER_ERROR_CODES.unavailable,
    `The provider could not be reached: ${upstreamMessage((error as Error).message ?? String(error))}`,
  );
}
