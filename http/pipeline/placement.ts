import { context, propagation } from '@opentelemetry/api';
import type { HttpResponse } from 'uWebSockets.js';
import { request as undiciRequest } from 'undici';
import { ApiError } from '../errors.ts';
import { authenticate, type Authentication } from '../auth/authenticate.ts';
import { statusLine, type ResponseState } from '../respond.ts';
import type { ForwardedAnswer, Reply, RequestContext } from '../route.ts';
import type { CompiledRoute } from '../router.ts';
import type { Services } from '../services.ts';
import type { RequestHead } from '../uws.ts';
import { decodeParams, parseQuery } from './request-values.ts';
import type { Logger } from '../../runtime/logger.ts';
import { FORWARDED_HEADER, type ClusterRouting, type RemotePlacement } from '../../runtime/cluster/routing.ts';

// Cluster mode: where a request acting on a workspace is served. On the node that runs the workspace's
// shard: here, or, signed, on the owner's internal port, whose answer is relayed as it is.

/** Headers of one connection, never relayed by a forward (content-length is recomputed). */
export const HOP_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
  FORWARDED_HEADER,
]);

export interface OutgoingRequest {
  method: string;
  /** Path and query, as received. */
  target: string;
  /** The client's headers (lower-case names); those of the connection are left out. */
  headers: Record<string, string>;
  /** The exact bytes sent, which the signature covers. */
  body: Buffer | string | undefined;
  requestId: string;
  /** Set when the body is replaced (a JSON body sent re-serialised); otherwise the client's is kept. */
  contentType?: string;
  /** Whether the trace context goes along (traceparent). */
  tracing: boolean;
}

/** The request being placed, and how the pipeline goes on with it when it is served here. */
export interface PlacedRequest {
  readonly incoming: RequestHead;
  readonly requestId: string;
  readonly res: HttpResponse;
  readonly state: ResponseState;
  /** The bytes of the body read whole, which a forwarding node's signature covers. */
  readonly receivedBody: Buffer | undefined;
  /** The status answered. */
  status: number | undefined;
  /** Served here once the caller is known and the body read (a body that could not be read included). */
  afterWaiting(
    route: CompiledRoute,
    rawParams: Record<string, string>,
    authn: Authentication | Promise<Authentication>,
    reading: Promise<unknown> | undefined,
  ): Promise<void>;
  /** Served here, caller known and body read. */
  serve(route: CompiledRoute, rawParams: Record<string, string>, authn: Authentication, body: unknown): Promise<void> | undefined;
}

/** What placement needs of the server. */
export interface PlacementSettings {
  readonly services: Services;
  /** Whether the trace context goes along with a forwarded request. */
  readonly tracing: boolean;
}

/**
 * Serves the request here if this node runs its workspace (or it names none); forwards it to the node
 * that does otherwise, before authentication. A request another node forwarded is never forwarded again:
 * if this node does not run the workspace (any more), the answer is 503 and the client retries.
 */
export async function placeInCluster(
  request: PlacedRequest,
  settings: PlacementSettings,
  cluster: ClusterRouting,
  route: CompiledRoute,
  rawParams: Record<string, string>,
  reading: Promise<unknown> | undefined,
): Promise<void> {
  const { services } = settings;
  const { method, path, rawQuery, headers } = request.incoming;
  let body: unknown;
  try {
    body = reading ? await reading : undefined;
  } catch {
    // A body that cannot be read is answered where it arrived, after authentication as always.
    return request.afterWaiting(route, rawParams, authenticate(services, route.def, { method, headers }), reading);
  }
  const target = rawQuery === '' ? path : `${path}?${rawQuery}`;
  const signature = headers[FORWARDED_HEADER];
  // Forwarded by a node only if signed for these very bytes: a body altered on the way is not.
  const forwarded = signature !== undefined && cluster.verify(signature, method, target, request.receivedBody);
  const workspaceId = await route.def.owner!({ params: decodeParams(rawParams), query: parseQuery(rawQuery), body, headers, db: services.db });
  if (workspaceId !== undefined) {
    const placement = await cluster.placement(workspaceId);
    if (placement.kind === 'unavailable' || (placement.kind === 'remote' && forwarded)) {
      throw workspaceMoving();
    }
    if (placement.kind === 'remote') return forwardAndRelay(request, settings, cluster, placement, target, body);
  }
  const authn = await authenticate(services, route.def, { method, headers });
  return request.serve(route, rawParams, authn, body);
}

/**
 * Sends the request to the owner's internal channel and relays its answer as it is. A JSON
 * body goes as JSON.stringify of what was parsed: those are the bytes signed, and the bytes the owner receives.
 */
async function forwardAndRelay(
  request: PlacedRequest,
  settings: PlacementSettings,
  cluster: ClusterRouting,
  owner: RemotePlacement,
  target: string,
  body: unknown,
): Promise<void> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const answer = await forwardToOwner(cluster, settings.services.logger, owner, {
    method: request.incoming.method,
    target,
    headers: request.incoming.headers,
    body: payload,
    requestId: request.requestId,
    contentType: payload === undefined ? undefined : 'application/json',
    tracing: settings.tracing,
  });
  request.status = answer.status;
  relayAnswer(request.res, request.state, answer);
}

/** Cluster mode: the workspace's shard has no owner that can serve the request now (failover, handover). */
export function workspaceMoving(): ApiError {
  return new ApiError('service_unavailable', 'The workspace is moving between nodes of the service; retry shortly.', { 'Retry-After': '1' });
}

/**
 * Sends a request to the owner's internal channel, signed for its method, target and body, and returns that
 * node's answer. A node that cannot be reached is a 503 with Retry-After; one that cannot be reached, or
 * answers 503, is looked up again by the next request (the client retries this one).
 */
export async function forwardToOwner(cluster: ClusterRouting, logger: Logger, owner: RemotePlacement, request: OutgoingRequest): Promise<ForwardedAnswer> {
  const address = owner.address;
  const outgoing: Record<string, string> = {};
  for (const name in request.headers) if (!HOP_HEADERS.has(name)) outgoing[name] = request.headers[name]!;
  outgoing['x-request-id'] = request.requestId;
  outgoing[FORWARDED_HEADER] = cluster.sign(request.method, request.target, request.body);
  if (request.tracing) propagation.inject(context.active(), outgoing);
  if (request.contentType !== undefined) outgoing['content-type'] = request.contentType;
  try {
    const answer = await undiciRequest(`http://${address}${request.target}`, {
      method: request.method as 'POST',
      headers: outgoing,
      body: request.body,
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    if (answer.statusCode === 503) cluster.forwardFailed(owner);
    return { status: answer.statusCode, headers: answer.headers, body: Buffer.from(await answer.body.arrayBuffer()) };
  } catch (error) {
    cluster.forwardFailed(owner);
    logger.warn({ err: error, owner: address }, 'forwarding to the node that runs the workspace failed');
    throw new ApiError('service_unavailable', 'The node that runs this workspace cannot be reached; retry shortly.', { 'Retry-After': '1' });
  }
}

/** Writes another node's answer to the client: its status, headers (but those of the connection) and body. */
export function relayAnswer(res: HttpResponse, state: ResponseState, answer: ForwardedAnswer, closeConnection = false): void {
  if (state.aborted || state.finished) return;
  state.finished = true;
  state.status = answer.status;
  res.cork(() => {
    res.writeStatus(statusLine(answer.status));
    for (const [name, value] of Object.entries(answer.headers)) {
      if (HOP_HEADERS.has(name) || value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) res.writeHeader(name, one);
    }
    res.end(answer.body, closeConnection);
  });
}

/**
 * Cluster mode, for a route that learns its workspace only from a body it reads itself (a payment provider's
 * event, whose signature must be checked first): where the request is served, once `body` is read whole.
 * Undefined: here (or not in cluster mode). A reply: the answer of the node that runs the workspace, the
 * same bytes forwarded to it. Throws 503 with Retry-After when no node runs the workspace right now, or
 * when this request was itself forwarded here (verified for these bytes) and this node does not run it:
 * a forwarded request is never forwarded again.
 */
export async function placeReadBody(ctx: RequestContext, workspaceId: string, body: Buffer): Promise<Reply | undefined> {
  const cluster = ctx.services.cluster;
  if (!cluster) return undefined;
  const placement = await cluster.placement(workspaceId);
  if (placement.kind === 'here') return undefined;
  const target = ctx.rawQuery === '' ? ctx.path : `${ctx.path}?${ctx.rawQuery}`;
  const signature = ctx.headers[FORWARDED_HEADER];
  const forwarded = signature !== undefined && cluster.verify(signature, ctx.method, target, body);
  if (placement.kind === 'unavailable' || forwarded) throw workspaceMoving();
  const answer = await forwardToOwner(cluster, ctx.services.logger, placement, {
    method: ctx.method,
    target,
    headers: ctx.headers,
    body,
    requestId: ctx.requestId,
    tracing: true,
  });
  return { relayed: answer };
}
