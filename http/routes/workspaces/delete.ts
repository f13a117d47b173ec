import { defineRoute } from '../../route.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { openWorkspace, requireRole, requireSession } from './access.ts';
import { cleanUpRemovedWorkspaces, deleteWorkspaceIn } from './deletion.ts';
import { WorkspaceParams } from './shapes.ts';

export const deleteWorkspace = defineRoute({
  method: 'DELETE',
  path: '/v1/workspaces/:workspaceId',
  operationId: 'deleteWorkspace',
  summary: 'Delete a workspace with its members, invitations, API keys, generations and files (owner only; 409 while generations run)',
  description:
    'Deletes a workspace with its members, invitations, API keys, generations and files. The owner only, signed in; while generations of the workspace are still running the answer is 409.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  params: WorkspaceParams,
  responses: { 204: null },
  handler: async ({ auth, params, services }) => {
    requireSession(auth, 'delete workspaces');
    const removed = await inTransaction(openUnit(services.db), async (tx) => {
      const access = await openWorkspace(tx, auth, params.workspaceId, { lock: true });
      requireRole(access, ['owner'], 'delete it');
      return deleteWorkspaceIn(tx, params.workspaceId);
    });
    await cleanUpRemovedWorkspaces(services, [removed]);
    return { status: 204 };
  },
});
