import { ApiError } from '../errors.ts';
import type { Principal, RouteDef, Scope } from '../route.ts';
import type { Services } from '../services.ts';
import type { KeyRecord } from './key-cache.ts';
import { secondsUntil, type RateWindow } from './limiter.ts';
import { assertSameOrigin } from './origin.ts';
import { readSessionToken, resolveSession } from './sessions.ts';
import { API_KEY_PATTERN, sha256Hex } from './tokens.ts';

const KEY_WINDOW_MS = 60_000;
const BEARER = /^Bearer +(\S+) *$/i;
let lastLimiterWarning = -Infinity;

export interface AuthRequest {
  method: string;
  headers: Record<string, string>;
}

/** Where a request names its workspace. */
export interface WorkspaceCarrier {
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
}

export interface Authentication {
  principal: Principal | undefined;
  /** X-RateLimit-* headers, for every response to a key-authenticated request. */
  headers: Record<string, string> | undefined;
}

const NONE: Authentication = { principal: undefined, headers: undefined };

/**
 * Resolves the caller of a request according to the route's access (see Access in http/route.ts),
 * before its body is read, or throws the error the caller gets. For keys, in this order: the key
 * itself (401), its rate limit (429), dashboard-only routes (403), scope (403, the route's access and
 * what it asks of keys beyond it, RouteDef.keys), all before the body is validated; the workspace check
 * (403) follows once the body is read (assertKeyWorkspace). For sessions: the session (401), then
 * the Origin of writes (403).
 * A key found in the cache with the in-memory limiter is resolved synchronously (no promise made):
 * this is the hot path of every API call.
 */
export function authenticate(services: Services, route: RouteDef, request: AuthRequest): Authentication | Promise<Authentication> {
  if (route.access === 'public') return NONE;
  const authorization = request.headers.authorization;
  if (authorization !== undefined) return authenticateKey(services, route, authorization);
  return authenticateSession(services, request);
}

async function authenticateSession(services: Services, request: AuthRequest): Promise<Authentication> {
  const token = readSessionToken(request.headers.cookie);
  if (token === undefined) {
    throw new ApiError('unauthenticated', 'Authentication is required: send an API key as Authorization: Bearer <key>, or sign in.');
  }
  const session = await resolveSession(services, token);
  assertSameOrigin(services.config, request.method, request.headers);
  return { principal: { kind: 'session', userId: session.userId, sessionId: session.id }, headers: undefined };
}

function authenticateKey(services: Services, route: RouteDef, authorization: string): Authentication | Promise<Authentication> {
  const match = BEARER.exec(authorization);
  if (!match) throw new ApiError('unauthenticated', 'The Authorization header must be "Bearer <API key>".');
  const plaintext = match[1]!;
  if (!API_KEY_PATTERN.test(plaintext)) throw new ApiError('unauthenticated', 'The API key is not valid.');
  const found = services.keyCache.lookup(sha256Hex(plaintext));
  return found instanceof Promise ? found.then((key) => admitKey(services, route, key)) : admitKey(services, route, found);
}

function admitKey(services: Services, route: RouteDef, key: KeyRecord | null): Authentication | Promise<Authentication> {
  if (!key) throw new ApiError('unauthenticated', 'The API key is not valid.');
  if (key.revoked) throw new ApiError('unauthenticated', 'The API key has been revoked.');
  if (key.expiresAt !== null && key.expiresAt <= services.clock.now()) throw new ApiError('unauthenticated', 'The API key has expired.');
  let window: RateWindow | Promise<RateWindow>;
  try {
    window = services.limiter.hit(`key:${key.id}`, key.requestsPerMinute, KEY_WINDOW_MS);
  } catch (error) {
    return authorizeKey(services, route, key, limiterDown(services, key, error));
  }
  if (window instanceof Promise) {
    return window.then(
      (w) => authorizeKey(services, route, key, limitHeaders(services, w)),
      (error: unknown) => authorizeKey(services, route, key, limiterDown(services, key, error)),
    );
  }
  return authorizeKey(services, route, key, limitHeaders(services, window));
}

function authorizeKey(services: Services, route: RouteDef, key: KeyRecord, headers: Record<string, string> | undefined): Authentication {
  services.keyUsage.record(key.id);
  if (route.access === 'dashboard') {
    throw new ApiError('forbidden', 'API keys cannot call this endpoint; it is for the dashboard only.', headers);
  }
  if (typeof route.access === 'object' && !grants(key.scopes, route.access.scopes)) {
    throw new ApiError('forbidden', `The API key lacks the scope this endpoint needs: ${route.access.scopes.join(' or ')}.`, headers);
  }
  // What the route asks of keys beyond its access (RouteDef.keys) is refused here too, before the body is
  // validated: a key the handler would refuse must not learn the body's rules from a 400 first.
  if (route.keys === 'refused') {
    throw new ApiError('forbidden', 'API keys cannot call this endpoint; it is for people, signed in.', headers);
  }
  if (typeof route.keys === 'object' && !grants(key.scopes, route.keys.scopes)) {
    throw new ApiError('forbidden', `The API key lacks the scope this endpoint needs: ${route.keys.scopes.join(' or ')}.`, headers);
  }
  return { principal: key.principal, headers };
}

/** The X-RateLimit-* headers of a counted request; throws 429 past the limit. */
function limitHeaders(services: Services, window: RateWindow): Record<string, string> {
  const reset = String(secondsUntil(window.resetAt, services.clock.now()));
  const headers: Record<string, string> = {
    'X-RateLimit-Limit': String(window.limit),
    'X-RateLimit-Remaining': String(window.remaining),
    'X-RateLimit-Reset': reset,
  };
  if (!window.allowed) {
    throw new ApiError('rate_limited', `Rate limit of ${window.limit} requests per minute exceeded for this API key.`, { ...headers, 'Retry-After': reset });
  }
  return headers;
}

/** The limiter's back end is down: serve the request unlimited rather than fail it (and say so, at most every 10 s). */
function limiterDown(services: Services, key: KeyRecord, error: unknown): undefined {
  const now = services.clock.now();
  if (now - lastLimiterWarning >= 10_000 || now < lastLimiterWarning) {
    lastLimiterWarning = now;
    services.logger.warn({ err: error, keyId: key.id }, 'rate limiter unavailable; requests are not limited');
  }
  return undefined;
}

/** `all` grants everything; a wallet read (wallet.read) also accepts usage.read (docs/auth-and-keys.md, Scopes). */
export function grants(held: ReadonlySet<Scope>, required: readonly Scope[]): boolean {
  if (held.has('all')) return true;
  for (const scope of required) {
    if (held.has(scope)) return true;
    if (scope === 'wallet.read' && held.has('usage.read')) return true;
  }
  return false;
}

/**
 * A keyed request must name its key's workspace (path :workspaceId, query or body workspaceId), and
 * only it, unless the route says keyWorkspace: 'none'. Sessions pass; their handlers check membership.
 */
export function assertKeyWorkspace(route: RouteDef, authn: Authentication, request: WorkspaceCarrier): void {
  const principal = authn.principal;
  if (principal?.kind !== 'key' || route.keyWorkspace === 'none') return;
  const headers = authn.headers;
  const named = workspacesNamed(request);
  if (named.length === 0) {
    throw new ApiError(
      'forbidden',
      `Requests made with an API key must carry its workspace id (workspaceId ${principal.workspaceId}) in the body or the query.`,
      headers,
    );
  }
  if (named.some((id) => id !== principal.workspaceId)) {
    throw new ApiError('forbidden', 'This API key belongs to another workspace.', headers);
  }
}

/** Every workspace id a request names: path :workspaceId, query workspaceId, JSON body workspaceId. */
export function workspacesNamed(request: WorkspaceCarrier): unknown[] {
  const named: unknown[] = [];
  if (request.params.workspaceId !== undefined) named.push(request.params.workspaceId);
  if (request.query.workspaceId !== undefined) named.push(request.query.workspaceId);
  const body = request.body;
  if (body !== null && typeof body === 'object' && !Array.isArray(body) && 'workspaceId' in body) named.push((body as { workspaceId: unknown }).workspaceId);
  return named;
}
