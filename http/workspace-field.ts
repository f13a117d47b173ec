import { Type, type TObject, type TSchema } from '@sinclair/typebox';
import { ApiError } from './errors.ts';
import type { RouteDef } from './route.ts';
import { workspacesNamed, type WorkspaceCarrier } from './auth/authenticate.ts';

/**
 * One workspace rule for every route (docs/api.md, Authentication of every request): a route that acts
 * on a workspace accepts `workspaceId` in its query and, for methods with a body, in its JSON body,
 * wherever its own schemas put it. The named id is then copied to whichever of the two the handler reads,
 * so a handler sees one workspace whatever place the client chose.
 *
 * Routes it leaves as they are: public ones, and those declared `keyWorkspace: 'none'` (a session's own
 * account, the platform-wide emergency stop), which act on no workspace.
 */
const WorkspaceId = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'The workspace the request acts on; required with an API key (its own workspace). Accepted in the query or the body.',
});
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Routes whose handlers read workspaceId from the body (their own body schema declares it). */
const readsBodyWorkspace = new WeakSet<RouteDef>();

/** Whether the rule applies to the route. */
export function actsOnWorkspace(route: RouteDef): boolean {
  return route.access !== 'public' && route.keyWorkspace !== 'none' && route.rawBody !== 'stream';
}

function withWorkspace(schema: TSchema | undefined): TObject {
  if (schema === undefined) return Type.Object({ workspaceId: Type.Optional(WorkspaceId) }, { additionalProperties: false });
  const object = schema as TObject;
  if (object.type !== 'object' || !object.properties)
    throw new Error(`a workspace route's query and body must be objects (${JSON.stringify(schema).slice(0, 80)})`);
  if ('workspaceId' in object.properties) return object;
  return { ...object, properties: { ...object.properties, workspaceId: Type.Optional(WorkspaceId) } } as TObject;
}

/** The route with `workspaceId` accepted in its query and (POST, PUT, PATCH, DELETE) in its body. */
export function acceptWorkspaceField(route: RouteDef): RouteDef {
  if (!actsOnWorkspace(route)) return route;
  const next: RouteDef = { ...route, query: withWorkspace(route.query) };
  if ((route.body as TObject | undefined)?.properties?.workspaceId) readsBodyWorkspace.add(next);
  if (BODY_METHODS.has(route.method)) {
    next.body = withWorkspace(route.body);
    // A route that had no body still takes none: the body holding only workspaceId is optional.
    if (route.body === undefined) next.bodyOptional = true;
  }
  return next;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Checks that the path, query and body name one workspace, then copies it into the query and, for a
 * route whose handler reads it from the body, into a body that lacks it (only there: a body's other
 * rules, such as "at least one field", still see what the client sent). Runs after assertKeyWorkspace,
 * so a key naming another workspace has had its 403; a session naming two different ones gets 400.
 */
export function unifyWorkspace(route: RouteDef, request: WorkspaceCarrier): void {
  if (!actsOnWorkspace(route)) return;
  const { query, body } = request;
  const named = new Set(workspacesNamed(request).filter((id) => id !== undefined));
  if (named.size > 1) {
    throw new ApiError('validation_error', 'workspaceId: the path, the query and the body name different workspaces.');
  }
  const [workspaceId] = named;
  if (typeof workspaceId !== 'string') return;
  if (query.workspaceId === undefined) query.workspaceId = workspaceId;
  if (readsBodyWorkspace.has(route) && isObject(body) && body.workspaceId === undefined) body.workspaceId = workspaceId;
}
