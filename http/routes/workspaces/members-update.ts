import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { findUserOrFail } from '../../../persistence/stores/identity.ts';
import { findMember, setMemberRole } from '../../../persistence/stores/workspaces.ts';
import { inTransaction, openUnit } from '../../../persistence/stores/unit.ts';
import { MANAGERS, openWorkspace, requireRole, requireSession } from './access.ts';
import { MemberOut, MemberParams, MemberPatch, toMemberOut } from './shapes.ts';

export const updateMember = defineRoute({
  method: 'PATCH',
  path: '/v1/workspaces/:workspaceId/members/:userId',
  operationId: 'updateWorkspaceMember',
  summary: "Change a member's role to admin or member (owner or admin; the owner's role changes only by transfer)",
  description:
    "Changes a member's role to admin or member. Owners and admins only; the owner's own role changes only by transferring ownership (409, or 403 for an admin).",
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  params: MemberParams,
  body: MemberPatch,
  responses: { 200: MemberOut },
  handler: async ({ auth, params, body, services }) => {
    requireSession(auth, 'manage members');
    const out = await inTransaction(openUnit(services.db), async (tx) => {
      const access = await openWorkspace(tx, auth, params.workspaceId, { lock: true });
      const callerRole = requireRole(access, MANAGERS, 'change roles');
      const member = await findMember(tx, params.workspaceId, params.userId);
      if (!member) throw new ApiError('not_found', `No member ${params.userId} in workspace ${params.workspaceId}.`);
      if (member.role === 'owner') {
        if (callerRole !== 'owner') throw new ApiError('forbidden', "An admin cannot change the owner's role.");
        throw new ApiError('conflict', "The owner's role changes only by transferring ownership (POST /v1/workspaces/:workspaceId/transfer).");
      }
      const user = await findUserOrFail(tx, member.userId);
      if (member.role !== body.role) {
        await setMemberRole(tx, member.workspaceId, member.userId, body.role);
        member.role = body.role;
      }
      return toMemberOut(member, user);
    });
    return { body: out };
  },
});
