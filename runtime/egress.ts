/**
 * The egress guard: every request the service makes to a URL a client gave it (input files, webhooks) goes
 * through here (docs/assets.md, URL inputs and the egress guard).
 *
 * - http and https only; no credentials in the URL.
 * - The address is checked when the connection is made, on what DNS answered then (a custom `lookup` on the
 *   undici Agent), so a name that resolves to a public address at check time and to 127.0.0.1 at connect
 *   time (DNS rebinding) is still refused. Only global unicast addresses pass: loopback, private (RFC 1918),
 *   link-local (169.254/16, which holds the cloud metadata endpoints), CGNAT (100.64/10), unique-local
 *   (fc00::/7), multicast, unspecified, reserved and the IPv6 transition ranges that embed IPv4 are refused
 *   (an IPv4-mapped address passes when its IPv4 address does; see isPublicAddress).
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
import { Agent, type Dispatcher } from 'undici';

export type EgressErrorCode = 'invalid_url' | 'blocked_address' | 'dns_failed' | 'too_many_redirects' | 'too_large' | 'timeout' | 'network_error';

export class EgressError extends Error {
  constructor(
    readonly code: EgressErrorCode,
    message: string,
  ) {
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
    return { ok: false, reason: `the address ${literal} is not a public address${carried(literal)}` };
  }
  return { ok: true, url: parsed };
}

/**
 * Whether an IP address is global unicast, the only kind the guard connects to.
 *
 * IPv4: only what ipaddr.js calls `unicast` (not loopback, private, link-local with the metadata endpoint
 * 169.254.169.254, CGNAT, unspecified, broadcast, multicast, reserved, benchmarking...).
 *
 * IPv6: first, an address of a range that carries an IPv4 address (see embeddedIPv4) is refused when any
 * IPv4 address it may carry is refused by the IPv4 rule, so `::127.0.0.1` or `64:ff9b::a9fe:a9fe` never
 * reach the address they stand for. Then the IPv6 rule: an IPv4-mapped address (`::ffff:8.8.8.8`, which
 * a dual-stack socket connects to as the IPv4 address itself) passes with its public IPv4 address;
 * anything else must be global unicast, inside 2000::/3 and outside every special range ipaddr.js knows.
 * So the other transition ranges are refused whatever IPv4 address they carry: IPv4-compatible `::/96`
 * (deprecated since 2006), IPv4-translated `::ffff:0:0:0/96`, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`,
 * 6to4 `2002::/16` and Teredo `2001::/32`.
 */
export function isPublicAddress(address: string): boolean {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = parseAddress(address);
  } catch {
    return false;
  }
  if (parsed.kind() === 'ipv4') return isPublicIPv4(parsed as ipaddr.IPv4);
  const v6 = parsed as ipaddr.IPv6;
  const embedded = embeddedIPv4(v6);
  if (embedded.some((v4) => !isPublicIPv4(v4))) return false;
  if (v6.isIPv4MappedAddress()) return true;
  return v6.range() === 'unicast' && (v6.parts[0]! & 0xe000) === 0x2000;
}

/**
 * ipaddr.parse, except that `::a.b.c.d` is read as the IPv4-compatible address it is (::/96), as the
 * system reads it, and not as the IPv4-mapped `::ffff:a.b.c.d` ipaddr.js makes of it.
 */
export function parseAddress(text: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const compatible = /^::(\d{1,3}(?:\.\d{1,3}){3})(?:%[0-9a-z]+)?$/i.exec(text);
  if (compatible) {
    const [a, b, c, d] = ipaddr.IPv4.parse(compatible[1]!).octets as [number, number, number, number];
    return new ipaddr.IPv6([0, 0, 0, 0, 0, 0, (a << 8) | b, (c << 8) | d]);
  }
  return ipaddr.parse(text);
}

function isPublicIPv4(address: ipaddr.IPv4): boolean {
  return address.range() === 'unicast';
}

/**
 * The IPv4 addresses an IPv6 address may carry, by its range; none outside these ranges.
 * - IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96`, IPv4-translated `::ffff:0:0:0/96` and the NAT64
 *   well-known prefix `64:ff9b::/96`: the last 32 bits.
 * - NAT64 local-use `64:ff9b:1::/48` (RFC 8215): the operator may use any RFC 6052 prefix length within
 *   it, so every place one of those (48, 56, 64, 96) would put the IPv4 address.
 * - 6to4 `2002::/16`: bits 16-47.
 * - Teredo `2001::/32`: the server, bits 32-63, and the client, the last 32 bits inverted.
 */
export function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] {
  const p = address.parts;
  const v4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  const zeroUpTo = (end: number) => p.slice(0, end).every((part) => part === 0);
  if (zeroUpTo(5) && (p[5] === 0 || p[5] === 0xffff)) return [v4(p[6]!, p[7]!)];
  if (zeroUpTo(4) && p[4] === 0xffff && p[5] === 0) return [v4(p[6]!, p[7]!)];
  if (p[0] === 0x64 && p[1] === 0xff9b) {
    if (p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0) return [v4(p[6]!, p[7]!)];
    if (p[2] === 1) return [48, 56, 64, 96].map((prefixLength) => rfc6052IPv4(p, prefixLength));
    return [];
  }
  if (p[0] === 0x2002) return [v4(p[1]!, p[2]!)];
  if (p[0] === 0x2001 && p[1] === 0) return [v4(p[2]!, p[3]!), v4(p[6]! ^ 0xffff, p[7]! ^ 0xffff)];
  return [];
}

/** " (it carries 127.0.0.1)" for an IPv6 address that carries IPv4 addresses, for messages; "" otherwise. */
function carried(address: string): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = parseAddress(address);
  } catch {
    return '';
  }
  if (parsed.kind() !== 'ipv6') return '';
  const embedded = embeddedIPv4(parsed as ipaddr.IPv6);
  return embedded.length === 0 ? '' : ` (it carries ${[...new Set(embedded.map(String))].join(', ')})`;
}

/** The 32 bits after an RFC 6052 prefix of prefixLength bits, skipping bits 64-71 (the `u` octet). */
function rfc6052IPv4(parts: number[], prefixLength: number): ipaddr.IPv4 {
  const bit = (i: number) => (parts[i >> 4]! >> (15 - (i & 15))) & 1;
  const octets = [0, 0, 0, 0];
  for (let i = prefixLength, taken = 0; taken < 32; i++) {
    if (i >= 64 && i < 72) continue;
    octets[taken >> 3] = (octets[taken >> 3]! << 1) | bit(i);
    taken++;
  }
  return new ipaddr.IPv4(octets);
}

export interface AddressOptions {
  /** The operator's ALLOW_PRIVATE_EGRESS: every address is allowed. */
  allowPrivate?: boolean;
  /** Development mode (LOOPBACK_EGRESS): public addresses and loopback ones (127.0.0.0/8, ::1), nothing else private. */
  allowLoopback?: boolean;
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
  const maxRedirects = options.maxRedirects ?? 3;
  // One deadline for the whole exchange, redirects included.
  const deadline = performance.now() + options.timeoutMs;
  let current = url;
  let method: Dispatcher.HttpMethod = options.method ?? 'GET';
  let body = options.body;
  for (let redirects = 0; ; redirects++) {
    const checked = checkedUrl(current, policy);
    if (!checked.ok)
      throw new EgressError(checked.reason.startsWith('the address') ? 'blocked_address' : 'invalid_url', `${checked.reason}: ${shorten(current)}`);
    // With maxRedirects 0 (webhooks) a redirect is an answer like any other, returned as is; otherwise its
    // body is not read.
    const follows = maxRedirects > 0 ? isRedirect : never;
    const answer = await exchange(
      dispatcher,
      checked.url,
      method,
      options.headers,
      body,
      options.maxBytes,
      deadline - performance.now(),
      options.timeoutMs,
      follows,
    );
    if (follows(answer.status, answer.headers)) {
      if (redirects >= maxRedirects) throw new EgressError('too_many_redirects', `more than ${maxRedirects} redirects from ${shorten(url)}`);
      current = new URL(answer.headers.location as string, checked.url).toString();
      if (answer.status === 303 || ((answer.status === 301 || answer.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      continue;
    }
    const raw = answer.headers;
    // Flattened only if read (webhooks never read them).
    return {
      status: answer.status,
      get headers() {
        return flattenHeaders(raw);
      },
      body: answer.body,
      url: checked.url.toString(),
    };
  }
}

type ResponseHeaders = Record<string, string | string[] | undefined>;

function isRedirect(status: number, headers: ResponseHeaders): boolean {
  return REDIRECTS.has(status) && typeof headers.location === 'string';
}

function never(): boolean {
  return false;
}

interface Answer {
  status: number;
  headers: ResponseHeaders;
  body: Buffer;
}

/** One request and its answer; see Exchange. */
function exchange(
  dispatcher: Agent,
  url: URL,
  method: Dispatcher.HttpMethod,
  headers: Record<string, string> | undefined,
  body: string | Buffer | undefined,
  maxBytes: number,
  remainingMs: number,
  timeoutMs: number,
  headersOnly: (status: number, headers: ResponseHeaders) => boolean,
): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    const handler = new Exchange(resolve, reject, maxBytes, timeoutMs, headersOnly, remainingMs);
    try {
      dispatcher.dispatch({ origin: url.origin, path: `${url.pathname}${url.search}`, method, headers, body }, handler);
    } catch (error) {
      handler.settle(asEgressError(error));
    }
  });
}

/**
 * The handler of one request, given to undici's dispatcher: the answer's body is gathered as it comes, up
 * to maxBytes, and the time limit is one timer that aborts the request, cleared when the answer is complete.
 * (undici's `request` would make an AbortSignal, its listeners and a body stream for every exchange; under
 * a load of webhooks those were a tenth of the service's work.) An answer that `headersOnly` picks is
 * returned as soon as its headers arrive, its body unread and the request aborted. A class, so an exchange
 * makes no closures of its own (the service runs through tsx, which wraps every named closure it makes).
 */
class Exchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  /** Why the request is to be aborted, kept for a controller that does not exist yet (the request still waits for a connection). */
  private abortReason: Error | undefined;
  private settled = false;
  private status = 0;
  private headers: ResponseHeaders = {};
  private readonly chunks: Buffer[] = [];
  private received = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly resolve: (answer: Answer) => void,
    private readonly reject: (error: Error) => void,
    private readonly maxBytes: number,
    readonly timeoutMs: number,
    private readonly headersOnly: (status: number, headers: ResponseHeaders) => boolean,
    remainingMs: number,
  ) {
    this.timer = setTimeout(timeOut, Math.max(0, remainingMs), this);
    this.timer.unref();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortReason) controller.abort(this.abortReason);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void {
    this.status = statusCode;
    this.headers = headers;
    if (this.headersOnly(statusCode, headers)) {
      this.settle(undefined, { status: statusCode, headers, body: EMPTY });
      this.abort(new Error('the body of this answer is not read'));
      return;
    }
    const declared = Number(headers['content-length']);
    if (Number.isFinite(declared) && declared > this.maxBytes) {
      this.fail(new EgressError('too_large', `the response has ${declared} bytes, more than the ${this.maxBytes} allowed`));
    }
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    this.received += chunk.length;
    if (this.received > this.maxBytes) {
      this.fail(new EgressError('too_large', `the response is larger than the ${this.maxBytes} bytes allowed`));
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    const { chunks } = this;
    this.settle(undefined, {
      status: this.status,
      headers: this.headers,
      body: chunks.length === 0 ? EMPTY : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.received),
    });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.settle(asEgressError(error));
  }

  settle(error: Error | undefined, answer?: Answer): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    if (error) this.reject(error);
    else this.resolve(answer!);
  }

  /** Settles with the error and aborts the request. */
  fail(error: EgressError): void {
    this.settle(error);
    this.abort(error);
  }

  private abort(reason: Error): void {
    this.abortReason ??= reason;
    this.controller?.abort(reason);
  }
}

function timeOut(exchange: Exchange): void {
  exchange.fail(new EgressError('timeout', `no complete answer within ${exchange.timeoutMs} ms`));
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
const publicOrLoopback: AddressPolicy = (address) => isPublicAddress(address) || isLoopbackAddress(address);

/** Whether an address is a loopback one: 127.0.0.0/8, ::1, or an IPv4-mapped 127.x address. */
export function isLoopbackAddress(address: string): boolean {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = parseAddress(address);
  } catch {
    return false;
  }
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() === 'loopback';
}

/** The addresses a request under these options may reach. */
export function policyOf(options: AddressOptions): AddressPolicy {
  return options.allowAddress ?? (options.allowPrivate ? allowAll : options.allowLoopback ? publicOrLoopback : isPublicAddress);
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
        const refusal: NodeJS.ErrnoException = new EgressError(
          'blocked_address',
          `${hostname} resolves to ${blocked.address}, which is not a public address${carried(blocked.address)}`,
        );
        return callback(refusal, []);
      }
      if (list.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      if ((options as LookupAllOptions).all) return callback(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

function asEgressError(error: unknown): EgressError {
  if (error instanceof EgressError) return error;
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof EgressError) return cause;
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

function shorten(url: string): string {
  return url.length > 200 ? `${url.slice(0, 200)}…` : url;
}
