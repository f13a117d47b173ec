import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { clearedSessionCookie } from '../../auth/sessions.ts';
import { countOtherMembers, deleteUserRow, exportsOf, findUserOrFail, ownedMemberships } from '../../../persistence/stores/identity.ts';
import { findWorkspace } from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from '../workspaces/access.ts';
import { cleanUpRemovedWorkspaces, deleteWorkspaceIn, type RemovedWorkspace } from '../workspaces/deletion.ts';
import { removeExportFiles } from './export-file.ts';

export const deleteMe = defineRoute({
  method: 'DELETE',
  path: '/v1/me',
  operationId: 'deleteMe',
  summary: 'Delete the account, its sessions and personal data, and the workspaces it alone belongs to; 409 while it owns a workspace with other members',
  description:
    "Deletes the signed-in user's account with their sessions and personal data, and the workspaces they alone belong to. While they own a workspace that has other members the answer is 409: transfer ownership or remove the members first.",
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  keyWorkspace: 'none',
  responses: { 204: null },
  handler: async ({ auth, services }) => {
    const { userId } = requireSession(auth, 'delete user accounts');
    const removed = await inTransaction(openUnit(services.db), async (tx) => {
      await findUserOrFail(tx, userId, { lock: true });
      const owned = await ownedMemberships(tx, userId);
      const gone: RemovedWorkspace[] = [];
      const shared: string[] = [];
      for (const { workspaceId } of owned) {
        // Locked before counting, so nobody joins between the count and the delete.
        await findWorkspace(tx, workspaceId, { lock: true });
        if ((await countOtherMembers(tx, workspaceId, userId)) > 0) shared.push(workspaceId);
      }
      if (shared.length > 0) {
        throw new ApiError('conflict', `You own workspaces with other members (${shared.join(', ')}); transfer ownership or remove the members first.`);
      }
      for (const { workspaceId } of owned) gone.push(await deleteWorkspaceIn(tx, workspaceId));
      // Export files go before the rows: should the commit then fail, the user loses old exports, never their privacy.
      const exports = await exportsOf(tx, userId);
      await removeExportFiles(
        services.config.dataDir,
        exports.flatMap((e) => (e.filePath ? [e.filePath] : [])),
      );
      // Sessions, linked accounts, memberships and export records go with the user (ON DELETE CASCADE);
      // invitations sent and keys made elsewhere stay with their workspaces, no longer naming the user.
      await deleteUserRow(tx, userId);
      return gone;
    });
    await cleanUpRemovedWorkspaces(services, removed);
    return { status: 204, headers: { 'Set-Cookie': clearedSessionCookie(services.config) } };
  },
});
