import { defineRoute } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openWorkspace } from './access.ts';
import { toWorkspaceOut, WorkspaceOut, WorkspaceParams } from './shapes.ts';

export const getWorkspace = defineRoute({
  method: 'GET',
  path: '/v1/workspaces/:workspaceId',
  operationId: 'getWorkspace',
  summary: "A workspace the caller belongs to (or the API key's own workspace)",
  description:
    "Reads a workspace the signed-in user is a member of, with their role, or an API key's own workspace. A workspace the caller does not belong to answers 404, as one that does not exist.",
  tags: ['workspaces'],
  access: 'auth',
  params: WorkspaceParams,
  responses: { 200: WorkspaceOut },
  handler: async ({ auth, params, services }) => {
    const { workspace, role } = await openWorkspace(openUnit(services.db), auth, params.workspaceId);
    return { body: toWorkspaceOut(workspace, role) };
  },
});
