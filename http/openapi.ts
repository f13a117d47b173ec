import type { TSchema } from '@sinclair/typebox';
import { ERRORS } from './errors.ts';
import type { RouteDef } from './route.ts';
import { ErrorEnvelope } from './schemas/common.ts';

type Json = Record<string, unknown>;

/** The OpenAPI 3.1 document, built from the same TypeBox schemas the router validates with. */
export function buildOpenApi(routes: RouteDef[], info: { version: string; baseUrl: string }): Json {
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
      description: 'Runs AI generation jobs for workspaces. Every error answers with the envelope {error:{code,message,requestId}}.',
    },
    servers: [{ url: info.baseUrl }],
    tags: [...new Set(routes.flatMap((r) => r.tags))].sort().map((name) => ({ name })),
    paths,
    components: {
      schemas: { ErrorEnvelope: envelope },
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'gs_live_ followed by 64 characters [A-Za-z0-9]',
          description: 'An API key of one workspace: Authorization: Bearer <key>. A scoped operation lists the scopes that grant it; `all` grants everything.',
        },
        session: { type: 'apiKey', in: 'cookie', name: 'gs_session', description: 'Dashboard session, from POST /v1/auth/signup or /v1/auth/login.' },
      },
      responses: {
        Error: {
          description: `An error. Codes: ${Object.entries(ERRORS).map(([code, e]) => `${code} (${e.status})`).join(', ')}.`,
          headers: { 'X-Request-Id': { description: 'The request id, also in the body.', schema: { type: 'string' } } },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
        },
      },
    },
  };
}

function operation(route: RouteDef): Json {
  const parameters = [
    ...parametersOf(route.params, 'path'),
    ...parametersOf(route.query, 'query'),
  ];
  const responses: Json = {};
  for (const [status, schema] of Object.entries(route.responses)) {
    responses[status] = schema
      ? { description: 'Success', content: { 'application/json': { schema: plain(schema) } } }
      : { description: 'Success, no body' };
  }
  responses.default = { $ref: '#/components/responses/Error' };
  const op: Json = { operationId: route.operationId, summary: route.summary, tags: route.tags, responses };
  if (parameters.length > 0) op.parameters = parameters;
  if (route.body) op.requestBody = { required: !route.bodyOptional, content: { 'application/json': { schema: plain(route.body) } } };
  if (route.rawBody === 'stream') op.requestBody = { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } };
  op.security = securityOf(route);
  return op;
}

/** public: none; dashboard: the session cookie; auth: a key or a session; scoped: a key with one of the scopes, or a session. */
function securityOf(route: RouteDef): Json[] {
  const access = route.access;
  if (access === 'public') return [];
  if (access === 'dashboard') return [{ session: [] }];
  if (access === 'auth') return [{ apiKey: [] }, { session: [] }];
  return [{ apiKey: [...access.scopes] }, { session: [] }];
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
