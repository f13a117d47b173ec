import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { compileResponse, describeErrors } from '../../validation.ts';
import type { Services } from '../../services.ts';

export const ServiceIdentity = Type.Object(
  {
    name: Type.String(),
    version: Type.String(),
    docs: Type.String({ format: 'uri', description: 'URL of the OpenAPI 3.1 document.' }),
    engine: Type.Union([Type.Literal('uws-native'), Type.Literal('uws-fallback')], {
      description: 'HTTP engine: the native uWebSockets.js addon or its slow pure-Node fallback.',
    }),
  },
  { additionalProperties: false },
);

const validateIdentity = compileResponse(ServiceIdentity);

/**
 * The body depends only on the service, so it is built, checked against its schema and serialised once
 * per service (and again only if its public URL changes), then sent as is.
 */
const rendered = new WeakMap<Services, { publicUrl: string; raw: string }>();
function identityOf(services: Services): string {
  const cached = rendered.get(services);
  if (cached && cached.publicUrl === services.publicUrl) return cached.raw;
  const body = { name: 'generation-service', version: services.version, docs: `${services.publicUrl}/v1/openapi.json`, engine: services.engine };
  if (!validateIdentity(body)) throw new Error(`GET /v1 does not match its schema: ${describeErrors('response', validateIdentity.errors)}`);
  const raw = JSON.stringify(body);
  rendered.set(services, { publicUrl: services.publicUrl, raw });
  return raw;
}

export const getServiceIdentity = defineRoute({
  method: 'GET',
  path: '/v1',
  operationId: 'getServiceIdentity',
  summary: 'Service identity, version and docs link',
  description:
    'Names the service, its version, the HTTP engine it runs on and the address of this OpenAPI document. Needs no credentials and answers even while the database cannot be reached.',
  tags: ['meta'],
  access: 'public',
  needsDatabase: false,
  responses: { 200: ServiceIdentity },
  handler: ({ services }) => ({ raw: identityOf(services) }),
});
