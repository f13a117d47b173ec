import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { storageUsage } from '../../../persistence/assets/store.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openFilesWorkspace } from '../assets/access.ts';
import { MediaTypeName } from '../assets/shapes.ts';

const Count = Type.Integer({ minimum: 0 });

export const StorageOut = Type.Object(
  {
    workspaceId: Type.String(),
    plan: Type.String(),
    usedBytes: Type.Integer({ minimum: 0, description: "Bytes of all the workspace's assets (uploads and outputs)." }),
    limitBytes: Type.Integer({ minimum: 0, description: "The plan's storage limit; uploads and outputs past it are refused (422 plan_limit_reached)." }),
    availableBytes: Type.Integer({ minimum: 0 }),
    maxFileBytes: Type.Integer({ minimum: 0, description: "The plan's largest single upload." }),
    uploadMediaTypes: Type.Array(MediaTypeName, { description: 'What the plan may upload.' }),
    counts: Type.Object({ image: Count, video: Count, audio: Count }, { additionalProperties: false, description: 'Assets per media type.' }),
  },
  { additionalProperties: false },
);

export const getWorkspaceStorage = defineRoute({
  method: 'GET',
  path: '/v1/workspaces/:workspaceId/storage',
  operationId: 'getWorkspaceStorage',
  summary: "Storage used by the workspace's assets, its plan's limits, and asset counts per media type",
  description:
    "The storage used by the workspace's assets, the limits of its plan (total, per file, media types allowed) and the number of assets per media type.",
  tags: ['assets'],
  access: { scopes: ['usage.read'] },
  params: Type.Object({ workspaceId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false }),
  responses: { 200: StorageOut },
  handler: async ({ auth, params, services }) => {
    const unit = openUnit(services.db);
    const { workspace } = await openFilesWorkspace(unit, auth, params.workspaceId);
    const plan = services.catalog.plan(workspace.plan);
    const usage = await storageUsage(unit, workspace.id);
    return {
      body: {
        workspaceId: workspace.id,
        plan: plan.id,
        usedBytes: usage.usedBytes,
        limitBytes: plan.storageBytes,
        availableBytes: Math.max(0, plan.storageBytes - usage.usedBytes),
        maxFileBytes: plan.maxFileBytes,
        uploadMediaTypes: [...plan.uploadMediaTypes],
        counts: usage.counts,
      },
    };
  },
});
