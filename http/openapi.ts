import { isOpenAiPath } from './openai-errors.ts';
import type { TSchema } from '@sinclair/typebox';
import { ERRORS, type ErrorCode } from './errors.ts';
import type { RouteDef } from './route.ts';
import { ErrorEnvelope } from './schemas/common.ts';

type Json = Record<string, unknown>;

/** What each tag groups; every tag a route names is listed here (the lint test holds the document to it). */
export const TAGS: Record<string, string> = {
  meta: 'The service itself: its identity, its readiness and this document.',
  auth: 'Accounts and dashboard sessions: sign up, sign in and sign out. A session is the gs_session cookie.',
  account: 'The signed-in user: profile, password, sign-in methods, data export and account deletion. For people only; API keys are refused.',
  workspaces: 'Workspaces, their members, roles and invitations. Keys may read their own workspace; changes are made by people.',
  'api-keys': 'API keys of a workspace: create, list, change, revoke, and see their usage. Managed from the dashboard only, by owners and admins.',
  models: "The model catalog as a workspace's plan sees it.",
  generations: 'Generation jobs: create (one or a batch), list, read, cancel, and the platform-wide pause.',
  providers: 'Where providers (Replicate, fal, Cog) send their events about the jobs of a catalog deployment; each signed, checked before anything changes.',
  files: 'Uploads: a signed URL to put a file to, then completion, which makes it an asset.',
  assets: 'Assets of a workspace (uploads and generation outputs), their download URLs and the storage they use.',
  credits: 'Credits of a workspace: balance, ledger, and top-up orders paid through the payment provider.',
  wallet: 'The pay-as-you-go wallet: balance, deposits, transactions, auto-recharge and the monthly spend cap.',
  billing: "Subscriptions and payments: checkout, customer portal, cancellation, and the payment provider's signed events.",
  usage: 'Usage summaries of a workspace, or of one API key.',
  webhooks: 'Webhook endpoints of a workspace and their signed deliveries.',
  public: 'Catalogs and statistics anyone may read, without credentials.',
  streams: 'Live Server-Sent Events of generations and of a workspace (the WebSocket /v1/ws sends the same events: docs/streaming.md).',
};

const STATUS_TITLES: Record<number, string> = {
  400: 'The request is not valid',
  401: 'No valid credentials',
  402: 'Not enough credits or wallet funds',
  403: 'The caller may not do this',
  404: 'Not found',
  409: 'Conflicts with the current state',
  413: 'The request body is too large',
  422: 'A limit of the plan or the wallet',
  429: 'Too many requests',
  503: 'Unavailable for now; retry',
};

/** Why a code derived from the route's declaration is answered, for the response's description. */
const DERIVED_REASONS: Partial<Record<ErrorCode, string>> = {
  validation_error: 'a path parameter, query parameter or body that does not match its schema (the message names the field)',
  unauthenticated: 'no credentials, or a session or API key that is unknown, revoked or expired',
  rate_limited: "an API key past its plan's requests per minute (Retry-After and X-RateLimit-* headers)",
  not_found: 'no such resource, or one the caller may not see (answered exactly as a missing one)',
  payload_too_large: 'a JSON body over the size limit',
  service_unavailable: 'the database cannot be reached, or the workspace is moving between nodes (Retry-After)',
};

/** The OpenAPI 3.1 document, built from the same TypeBox schemas the router validates with. */
export function buildOpenApi(allRoutes: RouteDef[], info: { version: string; baseUrl: string }): Json {
  // The OpenAI-compatible door answers OpenAI's shapes and errors, not this document's envelope: OpenAI's own
  // API reference describes it, and docs/openai-compatible.md what it takes of it.
  const routes = allRoutes.filter((route) => !isOpenAiPath(route.path));
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    paths[path] ??= {};
    paths[path]![route.method.toLowerCase()] = operation(route);
  }
  const { $id: _id, ...envelope } = plain(ErrorEnvelope);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Generation Service API',
      version: info.version,
      description:
        'Runs AI generation jobs for workspaces. Every error answers with the envelope {error:{code,message,requestId}}; ' +
        'each operation lists the statuses and codes it can answer; `4XX` stands for the refusals any request can meet ' +
        '(method_not_allowed, uri_too_long, request_header_fields_too_large) and `default` for internal_error.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: info.baseUrl }],
    tags: [...new Set(routes.flatMap((r) => r.tags))].sort().map((name) => (TAGS[name] ? { name, description: TAGS[name] } : { name })),
    paths,
    components: {
      schemas: { ErrorEnvelope: envelope },
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'gs_live_ followed by 64 characters [A-Za-z0-9]',
          description:
            "An API key of one workspace: Authorization: Bearer <key>. In an operation's `security`, `apiKey: []` accepts any valid key, " +
            'and `apiKey: [scope]` (a role name, as OpenAPI 3.1 allows for schemes other than OAuth) accepts a key holding that scope; ' +
            'the requirements are alternatives, so a key needs one of the scopes listed (`all` grants everything). An operation without ' +
            '`apiKey` refuses keys (403 forbidden). A key must also name its own workspace where the operation takes one.',
        },
        session: {
          type: 'apiKey',
          in: 'cookie',
          name: 'gs_session',
          description: 'Dashboard session, from POST /v1/auth/signup or /v1/auth/login. Writes with a session from a foreign Origin are 403.',
        },
      },
      examples: Object.fromEntries(
        Object.entries(ERRORS).map(([code, e]) => [
          code,
          {
            summary: `${code} (${e.status})`,
            value: { error: { code, message: e.message, requestId: 'req_0123456789abcdef0123456789abcdef' } },
          },
        ]),
      ),
      headers: {
        RequestId: { description: 'The request id, also in the body.', schema: { type: 'string' } },
        RetryAfter: { description: 'Seconds to wait before retrying.', schema: { type: 'string' } },
      },
      responses: {
        ClientError: {
          description:
            'Any request can also be refused before it reaches an operation: method_not_allowed (405, with an Allow header), ' +
            'uri_too_long (414), request_header_fields_too_large (431).',
          headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } },
          content: {
            'application/json': {
              schema: { $ref: '#/components/schemas/ErrorEnvelope' },
              examples: examplesOf(['method_not_allowed', 'uri_too_long', 'request_header_fields_too_large']),
            },
          },
        },
        Error: {
          description: `An error. Codes: ${Object.entries(ERRORS)
            .map(([code, e]) => `${code} (${e.status})`)
            .join(', ')}.`,
          headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' }, examples: examplesOf(['internal_error']) } },
        },
      },
    },
  };
}

function examplesOf(codes: ErrorCode[]): Json {
  return Object.fromEntries(codes.map((code) => [code, { $ref: `#/components/examples/${code}` }]));
}

function operation(route: RouteDef): Json {
  const parameters = [...parametersOf(route.params, 'path'), ...parametersOf(route.query, 'query')];
  const responses: Json = {};
  for (const [status, schema] of Object.entries(route.responses)) {
    responses[status] = schema
      ? { description: 'Success', content: { 'application/json': { schema: plain(schema) } } }
      : route.eventStream && status === '200'
        ? {
            description: 'A stream of Server-Sent Events (docs/streaming.md)',
            content: {
              'text/event-stream': {
                schema: { type: 'string', description: 'Events: `id:`, `event:` and one `data:` line of JSON each; comments (`: ping`) while idle.' },
              },
            },
          }
        : { description: 'Success, no body' };
  }
  const ok = responses['200'] as { content?: Json } | undefined;
  if (route.csv && ok?.content) ok.content['text/csv'] = { schema: { type: 'string', description: route.csv } };
  for (const [status, codes] of errorsByStatus(route)) responses[status] = errorResponse(status, codes, route);
  responses['4XX'] = { $ref: '#/components/responses/ClientError' };
  responses.default = { $ref: '#/components/responses/Error' };
  const op: Json = { operationId: route.operationId, summary: route.summary, tags: route.tags, responses };
  if (route.description) op.description = route.description;
  if (parameters.length > 0) op.parameters = parameters;
  if (route.body) op.requestBody = { required: !route.bodyOptional, content: { 'application/json': { schema: plain(route.body) } } };
  if (route.rawBody === 'stream')
    op.requestBody = { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } };
  op.security = securityOf(route);
  return op;
}

/**
 * Exactly what the route accepts. public: nothing; dashboard, and routes whose handler refuses keys: the session
 * cookie; auth: any key or a session; scoped (by access, or by the handler's `keys`): a key holding one of the
 * scopes, or `all`, each an alternative requirement, or a session.
 */
export function securityOf(route: RouteDef): Json[] {
  const access = route.access;
  if (access === 'public') return [];
  if (access === 'dashboard' || route.keys === 'refused') return [{ session: [] }];
  const scopes = typeof route.keys === 'object' ? route.keys.scopes : typeof access === 'object' ? access.scopes : undefined;
  if (!scopes) return [{ apiKey: [] }, { session: [] }];
  return [...scopes.map((scope) => ({ apiKey: [scope] })), { apiKey: ['all'] }, { session: [] }];
}

/** Whether a caller that is authenticated can still be refused by the authentication layer (403 forbidden). */
function mayForbid(route: RouteDef): boolean {
  if (route.access === 'public') return false;
  if (route.access === 'dashboard' || route.keys !== undefined || typeof route.access === 'object') return true;
  // A key must name its own workspace; a session's write from a foreign Origin is refused.
  return (route.keyWorkspace ?? 'required') === 'required' || route.method !== 'GET';
}

/**
 * The codes a route can answer: derived from its declaration (access, inputs, path parameters, body,
 * database and cluster owner), plus those its handler declares in `errors`; grouped by status.
 */
export function errorCodesOf(route: RouteDef): ErrorCode[] {
  const codes = derivedCodesOf(route);
  for (const code of route.errors ?? []) codes.add(code);
  return [...codes];
}

function derivedCodesOf(route: RouteDef): Set<ErrorCode> {
  const codes = new Set<ErrorCode>();
  if (route.params || route.query || route.body || route.rawBody) codes.add('validation_error');
  if (route.access !== 'public') {
    codes.add('unauthenticated');
    if (mayForbid(route)) codes.add('forbidden');
    codes.add('rate_limited');
  }
  if (route.params) codes.add('not_found');
  if (route.body) codes.add('payload_too_large');
  if (route.needsDatabase !== false || route.owner) codes.add('service_unavailable');
  return codes;
}

function errorsByStatus(route: RouteDef): Array<[number, ErrorCode[]]> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(route)) {
    const status = ERRORS[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return [...byStatus.entries()].sort(([a], [b]) => a - b);
}

function errorResponse(status: number, codes: ErrorCode[], route: RouteDef): Json {
  const lines = codes.map((code) => `\`${code}\`: ${reasonFor(code, route).replace(/\.$/, '')}`);
  const headers: Json = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } };
  if (status === 429 || status === 503) headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
  const examples = examplesOf(codes);
  return {
    description: `${STATUS_TITLES[status] ?? 'An error'}. Codes: ${lines.join('; ')}.`,
    headers,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' }, examples } },
  };
}

/** Why the route answers a code: the reason derived from its declaration, else the registry's message. */
function reasonFor(code: ErrorCode, route: RouteDef): string {
  if (code === 'forbidden') {
    const reasons: string[] = [];
    if (route.access === 'dashboard' || route.keys === 'refused') reasons.push('an API key (this operation is for people, signed in)');
    else if (typeof route.access === 'object' || typeof route.keys === 'object') reasons.push('an API key without one of the scopes its security names');
    if (route.access !== 'public' && route.access !== 'dashboard' && route.keys !== 'refused' && (route.keyWorkspace ?? 'required') === 'required') {
      reasons.push('an API key naming another workspace than its own, or none');
    }
    if (route.access !== 'public' && route.method !== 'GET') reasons.push("a session's write from a foreign Origin");
    if (route.errors?.includes('forbidden')) reasons.push('a check of the operation itself (see its description)');
    if (reasons.length > 0) return reasons.join('; or ');
  }
  return (derivedCodesOf(route).has(code) ? DERIVED_REASONS[code] : undefined) ?? ERRORS[code].message;
}

function parametersOf(schema: TSchema | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const object = plain(schema) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(object.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (object.required ?? []).includes(name),
    schema: property,
    ...(typeof property.description === 'string' ? { description: property.description } : {}),
  }));
}

/** TypeBox schemas carry symbols; the document wants plain JSON. */
function plain(schema: TSchema): Json {
  return JSON.parse(JSON.stringify(schema)) as Json;
}
