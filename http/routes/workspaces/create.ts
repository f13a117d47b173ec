import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { insertWorkspace, type Workspace } from '../../../persistence/stores/workspaces.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from './access.ts';
import { toWorkspaceOut, WorkspaceIn, WorkspaceOut } from './shapes.ts';

export const createWorkspace = defineRoute({
  method: 'POST',
  path: '/v1/workspaces',
  operationId: 'createWorkspace',
  summary: 'Create a workspace on the free plan; the caller becomes its owner (signed-in users only)',
  description: 'Creates a workspace on the free plan with the signed-in user as its owner. For people only: an API key is 403.',
  tags: ['workspaces'],
  access: 'auth',
  keyWorkspace: 'none',
  keys: 'refused',
  body: WorkspaceIn,
  responses: { 201: WorkspaceOut },
  handler: async ({ auth, body, services }) => {
    const { userId } = requireSession(auth, 'create workspaces');
    const now = new Date(services.clock.now());
    const workspace: Workspace = {
      id: newId('ws', now.getTime()),
      name: body.name.trim(),
      plan: services.catalog.defaultPlan().id,
      personal: false,
      createdAt: now,
      updatedAt: now,
    };
    await insertWorkspace(openUnit(services.db), workspace, userId);
    return { status: 201, body: toWorkspaceOut(workspace, 'owner') };
  },
});
