import type { Span } from '@opentelemetry/api';
import type { RequestHead } from '../uws.ts';

/** Query parameters whose values never reach a span: signatures and tokens of signed URLs, and the like. */
const SECRET_QUERY = /(?:token|sig|signature|secret|key|password|credential|auth)/i;

/** url.query with the value of any parameter named like a secret replaced by REDACTED. */
export function redactedQuery(rawQuery: string): string {
  if (!SECRET_QUERY.test(rawQuery)) return rawQuery;
  return rawQuery
    .split('&')
    .map((pair) => {
      const at = pair.indexOf('=');
      return at !== -1 && SECRET_QUERY.test(pair.slice(0, at)) ? `${pair.slice(0, at)}=REDACTED` : pair;
    })
    .join('&');
}

/** The last Host header parsed, and what it gave: clients send the same one request after request. */
let lastHost: { host: string; address?: string; port?: number } = { host: '' };

/** server.address and server.port of a Host header (`name`, `name:port`, `[v6]:port`). */
export function serverOfHost(host: string): { address?: string; port?: number } {
  if (lastHost.host === host) return lastHost;
  const match = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(host);
  lastHost = match ? { host, address: match[1]!.replace(/^\[|\]$/g, ''), ...(match[2] ? { port: Number(match[2]) } : {}) } : { host };
  return lastHost;
}

/** The server span's request attributes (HTTP semantic conventions); the Host header gives server.address and server.port. */
export function serverSpanAttributes(incoming: RequestHead): Record<string, string | number> {
  const { method, path, rawQuery, headers, remoteAddress } = incoming;
  const attributes: Record<string, string | number> = {
    'http.request.method': method,
    'url.scheme': 'http',
    'url.path': path,
    'network.protocol.version': '1.1',
  };
  if (rawQuery !== '') attributes['url.query'] = redactedQuery(rawQuery);
  const host = headers.host;
  if (host) {
    const server = serverOfHost(host);
    if (server.address !== undefined) attributes['server.address'] = server.address;
    if (server.port !== undefined) attributes['server.port'] = server.port;
  }
  if (remoteAddress) attributes['client.address'] = remoteAddress;
  const userAgent = headers['user-agent'];
  if (userAgent) attributes['user_agent.original'] = userAgent;
  return attributes;
}

/** How a request ended, as its server span records it. */
export interface ServedRequest {
  readonly incoming: RequestHead;
  /** The matched route's template. */
  readonly routeLabel: string;
  /** The status answered (undefined: none, the client went away first). */
  readonly status: number | undefined;
  /** The class of an unexpected exception, when one ended the request. */
  readonly errorType: string | undefined;
}

/**
 * Names the server span by method and route, records the route and the status, and ends it. A server span
 * is an error for 5xx answers only (4xx are the client's): error.type is then the status, unless an
 * exception named it already.
 */
export function endServerSpan(span: Span, request: ServedRequest): void {
  span.updateName(`${request.incoming.method} ${request.routeLabel}`);
  span.setAttribute('http.route', request.routeLabel);
  const status = request.status;
  let errorType = request.errorType;
  if (status !== undefined) {
    span.setAttribute('http.response.status_code', status);
    if (status >= 500 && errorType === undefined) errorType = String(status);
  }
  if (errorType !== undefined) span.setAttribute('error.type', errorType);
  span.end();
}
