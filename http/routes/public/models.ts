import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { once, PublicModelOut, toPublicModelOut } from '../models/shape.ts';

export const PublicModelsOut = Type.Object({ data: Type.Array(PublicModelOut) }, { additionalProperties: false });

export const listPublicModels = defineRoute({
  method: 'GET',
  path: '/v1/models/public',
  operationId: 'listPublicModels',
  summary: 'Public model showcase: every model this service runs, with prices, plans and a sample prompt (no authentication)',
  description: 'A showcase of every model this service runs, with prices, the plans that may use it and a sample prompt. Needs no credentials.',
  tags: ['public'],
  access: 'public',
  responses: { 200: PublicModelsOut },
  handler: ({ services }) => {
    const catalog = services.catalog;
    const data = once(catalog, 'public-models', () => catalog.offered().map((model) => toPublicModelOut(catalog, model)));
    return { headers: { 'Cache-Control': 'public, max-age=60' }, body: { data } };
  },
});
