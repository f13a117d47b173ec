import { Type } from '@sinclair/typebox';
import { defineRoute, type Access, type RequestContext, type RouteDef } from '../../http/route.ts';

const Principal = Type.Object({ auth: Type.Any() });

function probe(method: 'GET' | 'POST', path: string, access: Access, extra: Partial<RouteDef> = {}): RouteDef {
  return defineRoute({
    method,
    path,
    operationId: `probe${path.replace(/[^A-Za-z]/g, '')}${method}`,
    summary: 'answers with the resolved principal',
    tags: ['test'],
    access,
    ...(method === 'POST'
      ? { body: Type.Object({ workspaceId: Type.Optional(Type.String()), n: Type.Optional(Type.Integer()) }, { additionalProperties: false }) }
      : {}),
    query: Type.Object({ workspaceId: Type.Optional(Type.String()) }, { additionalProperties: false }),
    responses: { 200: Principal },
    handler: ({ auth }: RequestContext) => ({ body: { auth } }),
    ...extra,
  } as never);
}

/** Test-only routes of every access kind, answering with ctx.auth. */
export function authProbeRoutes(): RouteDef[] {
  return [
    probe('GET', '/v1/probe/generations', { scopes: ['generations.read'] }),
    probe('POST', '/v1/probe/generations', { scopes: ['generations.write'] }),
    probe('GET', '/v1/probe/wallet', { scopes: ['wallet.read'] }),
    probe('GET', '/v1/probe/either', { scopes: ['assets.read', 'files.write'] }),
    probe('GET', '/v1/probe/any', 'auth'),
    probe('GET', '/v1/probe/no-workspace', 'auth', { keyWorkspace: 'none' }),
    probe('GET', '/v1/probe/dashboard', 'dashboard'),
    probe('POST', '/v1/probe/dashboard', 'dashboard'),
    defineRoute({
      method: 'GET',
      path: '/v1/probe/ws/:workspaceId/storage',
      operationId: 'probeWorkspacePath',
      summary: 'a workspace in the path',
      tags: ['test'],
      access: { scopes: ['usage.read'] },
      params: Type.Object({ workspaceId: Type.String() }),
      query: Type.Object({ workspaceId: Type.Optional(Type.String()) }, { additionalProperties: false }),
      responses: { 200: Principal },
      handler: ({ auth }) => ({ body: { auth } }),
    }),
  ];
}
