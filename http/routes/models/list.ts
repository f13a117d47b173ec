import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { ifNoneMatchMatches } from '../../conditional.ts';
import { readWorkspace } from '../generations/access.ts';
import { ModelListOut, once, toModelOut, type ModelOut } from './shape.ts';

export const listModels = defineRoute({
  method: 'GET',
  path: '/v1/models',
  operationId: 'listModels',
  summary: "The model catalog as the workspace's plan sees it: per-model credits, parameterSchema, and whether the plan may use each",
  description:
    "The model catalog as the workspace's plan sees it: each model's credits, its parameterSchema, and whether the plan may use it. A session must name the workspace; an API key reads its own.",
  tags: ['models'],
  access: { scopes: ['generations.read'] },
  errors: ['not_found'],
  // A key reads its own workspace's plan; naming another workspace is 403 (readWorkspace).
  query: Type.Object(
    {
      workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Required with a session; with an API key, its own workspace.' })),
    },
    { additionalProperties: false },
  ),
  // 304: the client's copy (If-None-Match: its ETag) is the catalog version and plan served now.
  responses: { 200: ModelListOut, 304: null },
  handler: async ({ auth, query, headers, services }) => {
    const workspace = await readWorkspace(openUnit(services.db), auth, query.workspaceId);
    const catalog = services.catalog;
    const plan = catalog.plan(workspace.plan).id;
    const etag = `"${catalog.version}-${plan}"`;
    if (ifNoneMatchMatches(headers['if-none-match'], etag)) return { status: 304, headers: { ETag: etag } };
    const data = once(catalog, `models:${plan}`, (): ModelOut[] => catalog.offered().map((model) => toModelOut(catalog, model, plan)));
    // The catalog's version, and the plan the answer is for (a plan change changes the answer too).
    return { headers: { ETag: etag }, body: { workspaceId: workspace.id, plan, data } };
  },
});
