import { Type } from '@sinclair/typebox';
import { buildOpenApi } from '../../openapi.ts';
import { defineRoute, type RouteDef } from '../../route.ts';

const OpenApiDocument = Type.Object({ openapi: Type.Literal('3.1.0') }, { additionalProperties: true });

/** Serves the document of the whole route table, itself included; built once, on first request. */
export function openApiRoute(routeTable: () => RouteDef[]): RouteDef {
  let document: string | undefined;
  return defineRoute({
    method: 'GET',
    path: '/v1/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'OpenAPI 3.1 description of every endpoint',
    description:
      'This document: every operation of the service with its parameters, bodies, answers, error codes and security, built from the same schemas the server validates requests with.',
    tags: ['meta'],
    access: 'public',
    needsDatabase: false,
    responses: { 200: OpenApiDocument },
    handler: ({ services }) => {
      document ??= JSON.stringify(buildOpenApi(routeTable(), { version: services.version, baseUrl: services.publicUrl }));
      return { raw: document };
    },
  });
}
