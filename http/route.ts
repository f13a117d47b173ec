import type { Readable } from 'node:stream';
import type { Static, TSchema } from '@sinclair/typebox';
import type { Services } from './services.ts';
import type { Database } from '../persistence/database.ts';
import type { Principal, Scope } from './auth/principal.ts';
import type { ErrorCode } from './errors.ts';
import type { FrameSink } from './streams/hub.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export { SCOPES, type Principal, type Scope } from './auth/principal.ts';

/**
 * Who may call a route:
 * - `public`: anyone, no credentials;
 * - `dashboard`: a session cookie only; API keys get 403 forbidden;
 * - `auth`: any authenticated caller, session or key;
 * - `{ scopes }`: a session, or a key holding one of these scopes (or `all`).
 */
export type Access = 'public' | 'dashboard' | 'auth' | { scopes: Scope[] };

/** The answer of the node a request was forwarded to, relayed to the client as it is. */
export interface ForwardedAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface Reply<B = unknown> {
  status?: number;
  body?: B;
  /** An already-serialised JSON body, sent as is (for large documents built once). */
  raw?: string;
  /** A body streamed with backpressure, of exactly `length` bytes (file downloads); set Content-Type in headers. */
  stream?: { body: Readable; length: number };
  headers?: Record<string, string>;
  /** A body of unknown length, written chunk by chunk as the handler makes it (exports); set Content-Type in headers. */
  chunked?: AsyncIterable<string>;
  /** Cluster mode: the answer of the node that runs the request's workspace, relayed as it is (placeReadBody). */
  relayed?: ForwardedAnswer;
  /**
   * A Server-Sent Events stream (a route declared `eventStream`): the server writes the head (200,
   * text/event-stream) and hands the stream to `attach`; `cancel` is called instead if the client went away.
   */
  sse?: { attach(sink: FrameSink): void; cancel(): void };
}

export interface RequestContext<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  requestId: string;
  method: Method;
  path: string;
  /** The query string as received, without `?` (empty when none). */
  rawQuery: string;
  params: P;
  query: Q;
  body: B;
  /** Lower-case header names. */
  headers: Record<string, string>;
  remoteAddress: string;
  /** Set for every route whose access is not `public`. */
  auth: Principal | undefined;
  services: Services;
  /** The request body, unread, for routes declared with `rawBody: 'stream'`. */
  bodyStream?: Readable;
}

/** A route: its method, path, access and schemas next to its handler; everything else is derived. */
export interface RouteDef<
  P extends TSchema | undefined = TSchema | undefined,
  Q extends TSchema | undefined = TSchema | undefined,
  B extends TSchema | undefined = TSchema | undefined,
> {
  method: Method;
  /** `/v1/things/:id` style; parameters are whole segments. */
  path: string;
  operationId: string;
  /** One line, for lists of operations. */
  summary: string;
  /**
   * One to three sentences: what the operation does, for whom, and what to know before calling it. Every route
   * of the route table has one (test/http/openapi-lint.test.ts); routes made only in tests may leave it out.
   */
  description?: string;
  tags: string[];
  access: Access;
  /**
   * What the handler asks of an API key beyond `access`, which the authentication layer checks before
   * validation: `refused`, the handler answers 403 forbidden to every key (the route is for people);
   * `{ scopes }`, it answers 403 to a key holding none of these scopes (or `all`). The document's
   * `security` follows it, and test/http/openapi-security.test.ts holds it to what a live server does.
   */
  keys?: 'refused' | { scopes: Scope[] };
  /**
   * The codes of http/errors.ts the handler (and what it calls) may answer, besides those derived from
   * the route (access: 401/403 and 429; params, query and body: 400; path parameters: 404; a body: 413;
   * the database and cluster owner: 503). Each is documented as a response of the operation.
   */
  errors?: ErrorCode[];
  /**
   * Whether a request made with an API key must name the key's workspace (path :workspaceId, query or
   * body workspaceId; any other workspace is 403). Default `required`; `none` for routes where a
   * workspace makes no sense (e.g. emergency-stop), whose handlers take the workspace from the key.
   */
  keyWorkspace?: 'required' | 'none';
  params?: P;
  query?: Q;
  body?: B;
  /**
   * `stream`: the body is not read as JSON nor held to the JSON size limit; the handler gets it as
   * ctx.bodyStream and enforces its own limit (blob uploads). Such a route declares no `body` schema.
   */
  rawBody?: 'stream';
  /** The body may be left out (a route whose only body field is workspaceId: workspace-field.ts). */
  bodyOptional?: boolean;
  /**
   * Whether the route needs the database (default true). While the database cannot be reached, such a route
   * answers 503 service_unavailable with Retry-After without running its handler.
   */
  needsDatabase?: boolean;
  /**
   * Cluster mode: the workspace whose actors the route acts through, found from the request before
   * authentication. A request for a workspace another node runs is forwarded to that node; without
   * `owner`, a route is served where it arrives (reads that go straight to the database).
   */
  owner?: OwnerOf;
  /** Its 200 may also be text/csv (the handler answers with `chunked`), documented with this description. */
  csv?: string;
  /** Its 200 is a text/event-stream (the handler answers with `sse`), documented as such. */
  eventStream?: boolean;
  /** Success responses by status; error responses are derived (see `errors`). */
  responses: Record<number, TSchema | null>;
  handler(ctx: RequestContext<StaticOr<P, Record<string, string>>, StaticOr<Q, Record<string, unknown>>, StaticOr<B, undefined>>): Promise<Reply> | Reply;
}

/** What `owner` sees: the raw request, before validation, and the database to look a row's workspace up. */
export type OwnerOf = (request: {
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  /** Lower-case header names. */
  headers: Record<string, string>;
  db: Database;
}) => string | undefined | Promise<string | undefined>;

type StaticOr<S, Fallback> = S extends TSchema ? Static<S> : Fallback;

/** Keeps the handler's context typed from the route's own schemas. */
export function defineRoute<P extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined, B extends TSchema | undefined = undefined>(
  route: RouteDef<P, Q, B>,
): RouteDef {
  return route as unknown as RouteDef;
}
