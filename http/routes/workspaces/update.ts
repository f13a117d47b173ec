import { defineRoute } from '../../route.ts';
import { updateWorkspaceRow } from '../../../persistence/stores/workspaces.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { MANAGERS, openWorkspace, requireRole, requireSession } from './access.ts';
import { toWorkspaceOut, WorkspaceOut, WorkspaceParams, WorkspacePatch } from './shapes.ts';

export const updateWorkspace = defineRoute({
  method: 'PATCH',
  path: '/v1/workspaces/:workspaceId',
  operationId: 'updateWorkspace',
  summary: 'Rename a workspace (owner or admin)',
  description: 'Renames a workspace. Owners and admins only, signed in; an API key is 403.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  params: WorkspaceParams,
  body: WorkspacePatch,
  responses: { 200: WorkspaceOut },
  handler: async ({ auth, params, body, services }) => {
    requireSession(auth, 'change workspace settings');
    const unit = openUnit(services.db);
    const access = await openWorkspace(unit, auth, params.workspaceId);
    const role = requireRole(access, MANAGERS, 'change its settings');
    const { workspace } = access;
    if (body.name !== undefined) workspace.name = body.name.trim();
    workspace.updatedAt = new Date(services.clock.now());
    await updateWorkspaceRow(unit, workspace.id, { name: workspace.name, updatedAt: workspace.updatedAt });
    return { body: toWorkspaceOut(workspace, role) };
  },
});
