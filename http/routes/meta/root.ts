import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';

export const ServiceIdentity = Type.Object({
  name: Type.String(),
  version: Type.String(),
  docs: Type.String({ format: 'uri', description: 'URL of the OpenAPI 3.1 document.' }),
  engine: Type.Union([Type.Literal('uws-native'), Type.Literal('uws-fallback')], { description: 'HTTP engine: the native uWebSockets.js addon or its slow pure-Node fallback.' }),
}, { additionalProperties: false });

export const getServiceIdentity = defineRoute({
  method: 'GET',
  path: '/v1',
  operationId: 'getServiceIdentity',
  summary: 'Service identity, version and docs link',
  tags: ['meta'],
  access: 'public',
  responses: { 200: ServiceIdentity },
  handler: ({ services }) => ({
    body: { name: 'generation-service', version: services.version, docs: `${services.config.baseUrl}/v1/openapi.json`, engine: services.engine },
  }),
});
