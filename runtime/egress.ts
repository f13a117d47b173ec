/**
 * The egress guard: every request the service makes to a URL a client gave it (input files, webhooks) goes
 * through here (DECISIONS.md "Egress guard").
 *
 * - http and https only; no credentials in the URL.
 * - The address is checked when the connection is made, on what DNS answered then (a custom `lookup` on the
 *   undici Agent), so a name that resolves to a public address at check time and to 127.0.0.1 at connect
 *   time (DNS rebinding) is still refused. Only global unicast addresses pass: loopback, private (RFC 1918),
 *   link-local (169.254/16, which holds the cloud metadata endpoints), CGNAT (100.64/10), unique-local
 *   (fc00::/7), multicast, unspecified, reserved and the IPv6 transition ranges that embed IPv4 are refused.
 * - Redirects are followed by hand, at most 3 by default, each target checked like the first URL.
 * - The response body is limited in bytes, and the whole exchange in time.
 * - `allowPrivate` (the operator's ALLOW_PRIVATE_EGRESS) lifts the address check, for development and tests.
 *
 * Use:
 *   const { body } = await fetchGuarded(url, { maxBytes: 64 << 20, timeoutMs: 30_000, allowPrivate: config.allowPrivateEgress });
 *   // webhooks: fetchGuarded(url, { method: 'POST', headers, body, maxRedirects: 0, maxBytes: 64 << 10, timeoutMs: 10_000, ... })
 * Failures throw EgressError with a `code` to branch on.
 */
import dns from 'node:dns';
import type { LookupAddress, LookupAllOptions, LookupOneOptions } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { Agent, request, type Dispatcher } from 'undici';
import { readLimited } from './read-limited.ts';

export type EgressErrorCode =
  | 'invalid_url' | 'blocked_address' | 'dns_failed' | 'too_many_redirects' | 'too_large' | 'timeout' | 'network_error';

export class EgressError extends Error {
  constructor(readonly code: EgressErrorCode, message: string) {
    super(message);
    this.name = 'EgressError';
  }
}

/** Syntax only (no DNS): http(s), a host, no credentials; an IP literal host is checked as an address too. */
export function checkUrlSyntax(url: string, options: AddressOptions = {}): { ok: true; url: URL } | { ok: false; reason: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, reason: 'not a valid URL' };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return { ok: false, reason: 'only http and https URLs are allowed' };
  if (parsed.username !== '' || parsed.password !== '') return { ok: false, reason: 'URLs with credentials are not allowed' };
  if (parsed.hostname === '') return { ok: false, reason: 'the URL has no host' };
  const literal = ipLiteral(parsed.hostname);
  if (literal !== undefined && !policyOf(options)(literal)) {
    return { ok: false, reason: `the address ${literal} is not a public address` };
  }
  return { ok: true, url: parsed };
}

/** Whether an IP address is global unicast, the only kind the guard connects to. */
export function isPublicAddress(address: string): boolean {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return false;
  }
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() === 'unicast';
}

export interface AddressOptions {
  /** The operator's ALLOW_PRIVATE_EGRESS: every address is allowed. */
  allowPrivate?: boolean;
  /** Which resolved addresses may be connected to, instead of isPublicAddress (tests narrow it to one loopback address). */
  allowAddress?: (address: string) => boolean;
}

export interface GuardedRequest extends AddressOptions {
  maxBytes: number;
  timeoutMs: number;
  /** Redirects followed (each target checked), default 3; with 0 a redirect is returned as the answer (webhooks). */
  maxRedirects?: number;
  method?: 'GET' | 'POST' | 'HEAD';
  headers?: Record<string, string>;
  body?: string | Buffer;
  /**
   * Connections per origin, default 64. Webhooks pass `unlimited`: each endpoint keeps at most one request
   * in flight, and endpoints sharing a host must not wait for each other's slow answers.
   */
  connectionsPerOrigin?: number | 'unlimited';
}

export interface GuardedResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The URL that answered, after redirects. */
  url: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Fetches a URL through the egress guard; see the top of this file. Non-2xx answers are returned, not thrown. */
export async function fetchGuarded(url: string, options: GuardedRequest): Promise<GuardedResponse> {
  const policy = policyOf(options);
  const dispatcher = agentFor(policy, options.connectionsPerOrigin ?? 64);
  // One timer for the whole exchange, cleared when it ends (AbortSignal.timeout would keep every signal and
  // its timer alive for the full time-out, tens of thousands of them under a load of webhooks).
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), options.timeoutMs);
  timer.unref();
  try {
    return await exchange(url, options, policy, dispatcher, controller.signal);
  } finally {
    clearTimeout(timer);
  }
}

async function exchange(url: string, options: GuardedRequest, policy: AddressPolicy, dispatcher: Agent, signal: AbortSignal): Promise<GuardedResponse> {
  const maxRedirects = options.maxRedirects ?? 3;
  let current = url;
  let method: string = options.method ?? 'GET';
  let body = options.body;
  for (let redirects = 0; ; redirects++) {
    const checked = checkedUrl(current, policy);
    if (!checked.ok) throw new EgressError(checked.reason.startsWith('the address') ? 'blocked_address' : 'invalid_url', `${checked.reason}: ${shorten(current)}`);
    let response: Dispatcher.ResponseData;
    try {
      response = await request(checked.url, { dispatcher, method: method as Dispatcher.HttpMethod, headers: options.headers, body, signal });
    } catch (error) {
      throw asEgressError(error, signal, options.timeoutMs);
    }
    const location = response.headers.location;
    // With maxRedirects 0 (webhooks) a redirect is an answer like any other, returned as is.
    if (REDIRECTS.has(response.statusCode) && typeof location === 'string' && maxRedirects > 0) {
      discard(response.body);
      if (redirects >= maxRedirects) throw new EgressError('too_many_redirects', `more than ${maxRedirects} redirects from ${shorten(url)}`);
      current = new URL(location, checked.url).toString();
      if (response.statusCode === 303 || ((response.statusCode === 301 || response.statusCode === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      continue;
    }
    const declared = Number(response.headers['content-length']);
    if (Number.isFinite(declared) && declared > options.maxBytes) {
      discard(response.body);
      throw new EgressError('too_large', `the response has ${declared} bytes, more than the ${options.maxBytes} allowed`);
    }
    let received: Buffer;
    try {
      // A body declared empty (or a 204/304, which has none) is only drained, so the connection is reused.
      if (declared === 0 || response.statusCode === 204 || response.statusCode === 304) {
        await response.body.dump();
        received = EMPTY;
      } else received = await readLimited(response.body, options.maxBytes, () => new EgressError('too_large', `the response is larger than the ${options.maxBytes} bytes allowed`));
    } catch (error) {
      throw asEgressError(error, signal, options.timeoutMs);
    }
    return { status: response.statusCode, headers: flattenHeaders(response.headers), body: received, url: checked.url.toString() };
  }
}

/** `(url) => bytes` for input files: a 2xx body, anything else an EgressError. */
export function guardedFetcher(options: GuardedRequest): (url: string) => Promise<Buffer> {
  return async (url) => {
    const response = await fetchGuarded(url, options);
    if (response.status < 200 || response.status > 299) throw new EgressError('network_error', `the server answered ${response.status}`);
    return response.body;
  };
}

/**
 * The bytes of a base64 data URL whose mime type is of `mediaType` (data:image/... for image modes,
 * data:video/... for video_to_video); EgressError('invalid_url') otherwise.
 */
export function decodeDataUrl(url: string, mediaType: 'image' | 'video', maxBytes: number): { contentType: string; bytes: Buffer } {
  const match = /^data:([a-z]+\/[a-z0-9.+-]+)((?:;[a-z0-9-]+=[^;,]*)*);base64,([A-Za-z0-9+/]*={0,2})$/i.exec(url);
  if (!match) throw new EgressError('invalid_url', `a data URL must look like data:${mediaType}/<type>;base64,<data>`);
  const contentType = match[1]!.toLowerCase();
  if (!contentType.startsWith(`${mediaType}/`)) throw new EgressError('invalid_url', `a data URL here must be data:${mediaType}/..., not data:${contentType}`);
  const encoded = match[3]!;
  if (encoded.length === 0) throw new EgressError('invalid_url', 'the data URL is empty');
  if (Math.floor((encoded.length * 3) / 4) - 2 > maxBytes) throw new EgressError('too_large', `the data URL holds more than ${maxBytes} bytes`);
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length > maxBytes) throw new EgressError('too_large', `the data URL holds more than ${maxBytes} bytes`);
  return { contentType, bytes };
}

const EMPTY = Buffer.alloc(0);

/**
 * checkUrlSyntax's verdict on a URL under a policy, remembered for the next request to the same URL (a
 * webhook endpoint posts to one URL again and again): the verdict depends on nothing but the two, so every
 * request is still checked against the rules, without parsing the same URL each time. (Names are checked
 * at each connection, by guardedLookup, as before.)
 */
const verdicts = new WeakMap<AddressPolicy, Map<string, ReturnType<typeof checkUrlSyntax>>>();
const VERDICTS_PER_POLICY = 4096;

function checkedUrl(url: string, policy: AddressPolicy): ReturnType<typeof checkUrlSyntax> {
  let byUrl = verdicts.get(policy);
  if (!byUrl) {
    byUrl = new Map();
    verdicts.set(policy, byUrl);
  }
  let verdict = byUrl.get(url);
  if (!verdict) {
    verdict = checkUrlSyntax(url, { allowAddress: policy });
    if (byUrl.size >= VERDICTS_PER_POLICY) byUrl.clear();
    byUrl.set(url, verdict);
  }
  return verdict;
}

type AddressPolicy = (address: string) => boolean;
const allowAll: AddressPolicy = () => true;

function policyOf(options: AddressOptions): AddressPolicy {
  return options.allowAddress ?? (options.allowPrivate ? allowAll : isPublicAddress);
}

/** One connection pool per address policy (and size): a pooled connection was made to an address its policy allowed. */
const agents = new Map<AddressPolicy, Map<number | 'unlimited', Agent>>();

function agentFor(policy: AddressPolicy, connections: number | 'unlimited'): Agent {
  let sized = agents.get(policy);
  if (!sized) {
    sized = new Map();
    agents.set(policy, sized);
  }
  let agent = sized.get(connections);
  if (!agent) {
    agent = new Agent({ connect: { lookup: guardedLookup(policy) }, connections: connections === 'unlimited' ? null : connections, keepAliveTimeout: 10_000 });
    sized.set(connections, agent);
  }
  return agent;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * dns.lookup as net.connect calls it, refusing names any of whose addresses is not public: the check is on
 * the very answer the socket connects to. (IP literals never reach a lookup; checkUrlSyntax checks those.)
 */
export function guardedLookup(allowAddress: AddressPolicy) {
  return (hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const list = addresses as LookupAddress[];
      const blocked = list.find((entry) => !allowAddress(entry.address));
      if (blocked) {
        const refusal: NodeJS.ErrnoException = new EgressError('blocked_address', `${hostname} resolves to ${blocked.address}, which is not a public address`);
        return callback(refusal, []);
      }
      if (list.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      if ((options as LookupAllOptions).all) return callback(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

function asEgressError(error: unknown, signal: AbortSignal, timeoutMs: number): EgressError {
  if (error instanceof EgressError) return error;
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof EgressError) return cause;
  if (signal.aborted) return new EgressError('timeout', `no complete answer within ${timeoutMs} ms`);
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new EgressError('dns_failed', `the host name could not be resolved (${code})`);
  return new EgressError('network_error', (error as Error).message || String(error));
}

function ipLiteral(hostname: string): string | undefined {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  return ipaddr.isValid(bare) && (bare.includes(':') || /^\d+\.\d+\.\d+\.\d+$/.test(bare)) ? bare : undefined;
}

function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  return flat;
}

/** Drops a response body unread; undici reports the abort as an error event, which nobody needs. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => {});
  body.destroy();
}

function shorten(url: string): string {
  return url.length > 200 ? `${url.slice(0, 200)}…` : url;
}
