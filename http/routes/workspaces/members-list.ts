import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { findUsers } from '../../../persistence/stores/identity.ts';
import { listMembers as listMemberRows } from '../../../persistence/stores/workspaces.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { openWorkspace, requireSession } from './access.ts';
import { MemberOut, toMemberOut, WorkspaceParams } from './shapes.ts';

const ListMembersQuery = Type.Object({ ...PageQueryFields }, { additionalProperties: false });

/** The members, with the user ids that role changes, removal and transfer take (docs/auth-and-keys.md, Members). */
export const listMembers = defineRoute({
  method: 'GET',
  path: '/v1/workspaces/:workspaceId/members',
  operationId: 'listWorkspaceMembers',
  summary: 'Members of a workspace with their roles, newest first (any member; signed-in users only)',
  description:
    'Lists the members of a workspace with their roles, newest first, for any signed-in member; this is where the user ids that role changes, removal and transfer take come from.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  params: WorkspaceParams,
  query: ListMembersQuery,
  responses: { 200: Page(MemberOut) },
  handler: async ({ auth, params, query, services }) => {
    requireSession(auth, 'list members');
    const unit = openUnit(services.db);
    await openWorkspace(unit, auth, params.workspaceId);
    const limit = query.limit ?? 20;
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, ['number', 'string']);
    const members = await listMemberRows(unit, params.workspaceId, {
      after: after === undefined ? undefined : [new Date(after[0] as number), after[1] as string],
      limit: limit + 1,
    });
    const users = new Map(
      (
        await findUsers(
          unit,
          members.map((m) => m.userId),
        )
      ).map((u) => [u.id, u]),
    );
    const rows = members.flatMap((member) => {
      const user = users.get(member.userId);
      return user ? [{ member, user }] : [];
    });
    return {
      body: pageOf(
        rows,
        limit,
        ({ member }) => [member.createdAt.getTime(), member.userId],
        ({ member, user }) => toMemberOut(member, user),
      ),
    };
  },
});
