import { createRequire } from 'node:module';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type * as UWS from 'uWebSockets.js';

export type Engine = 'uws-native' | 'uws-fallback';

const require = createRequire(import.meta.url);

/**
 * True once loadUws found the pure-Node fallback. Its HttpRequest/HttpResponse leave several methods
 * unimplemented (they throw): getCaseSensitiveMethod, forEach, getQuery on a relative URL,
 * getRemoteAddressAsText, endWithoutBody, pause, resume, tryEnd, onWritable, getWriteOffset. The few
 * places that need them ask this flag and use the Node request and response it wraps instead.
 */
export let onFallback = false;

/**
 * Loads uWebSockets.js and tells which engine it gave us: the package silently falls back
 * to a slow pure-Node emulation when its native addon cannot load.
 */
export function loadUws(): { uws: typeof UWS; engine: Engine } {
  const uws = require('uWebSockets.js') as typeof UWS;
  const native = Object.keys(require.cache).some((file) => /[\\/]uWebSockets\.js[\\/]binaries[\\/]uws_[^\\/]+\.node$/.test(file));
  onFallback = !native;
  return { uws, engine: native ? 'uws-native' : 'uws-fallback' };
}

/** What the server reads from a request before its handler returns (HttpRequest lives only that long). */
export interface RequestHead {
  method: string;
  /** Path without the query string, still percent-encoded. */
  path: string;
  rawQuery: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  headerBytes: number;
  remoteAddress: string;
}

/** Reads a request on the native addon. */
export function readNativeRequest(req: UWS.HttpRequest, res: UWS.HttpResponse): RequestHead {
  const headers: Record<string, string> = {};
  let headerBytes = 0;
  req.forEach((name, value) => {
    headers[name] = value;
    headerBytes += name.length + value.length + 4;
  });
  return {
    method: req.getCaseSensitiveMethod().toUpperCase(),
    path: req.getUrl(),
    rawQuery: req.getQuery() ?? '',
    headers,
    headerBytes,
    remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString('latin1'),
  };
}

/** The Node objects the fallback's HttpRequest and HttpResponse wrap. */
function nodeOf(req: UWS.HttpRequest | undefined, res: UWS.HttpResponse): { request?: IncomingMessage; response: ServerResponse } {
  return {
    request: (req as unknown as { request?: IncomingMessage } | undefined)?.request,
    response: (res as unknown as { response: ServerResponse }).response,
  };
}

/** Reads a request on the pure-Node fallback, from the IncomingMessage it wraps. */
export function readFallbackRequest(req: UWS.HttpRequest, res: UWS.HttpResponse): RequestHead {
  const { request, response } = nodeOf(req, res);
  const url = request?.url ?? req.getUrl();
  const mark = url.indexOf('?');
  const headers: Record<string, string> = {};
  let headerBytes = 0;
  for (const [name, value] of Object.entries(request?.headers ?? {})) {
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.join(', ') : value;
    headers[name] = text;
    headerBytes += name.length + text.length + 4;
  }
  return {
    method: (request?.method ?? req.getMethod()).toUpperCase(),
    path: mark < 0 ? url : url.slice(0, mark),
    rawQuery: mark < 0 ? '' : url.slice(mark + 1),
    headers,
    headerBytes,
    remoteAddress: response.socket?.remoteAddress ?? request?.socket?.remoteAddress ?? '',
  };
}

/** Ends a response that has no body (the caller corks). */
export function endWithoutBody(res: UWS.HttpResponse, closeConnection = false): void {
  if (onFallback) res.end(undefined, closeConnection);
  else res.endWithoutBody(0, closeConnection);
}

/** The fallback's Node response, to write with Node's own backpressure. */
export function fallbackResponse(res: UWS.HttpResponse): ServerResponse {
  return nodeOf(undefined, res).response;
}
