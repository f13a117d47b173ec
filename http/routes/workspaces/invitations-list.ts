import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { InvitationEntity } from '../../../persistence/entities/invitation.ts';
import { openWorkspace, requireSession } from './access.ts';
import { InvitationOut, toInvitationOut, WorkspaceParams } from './shapes.ts';

const ListInvitationsQuery = Type.Object({ ...PageQueryFields }, { additionalProperties: false });

export const listInvitations = defineRoute({
  method: 'GET',
  path: '/v1/workspaces/:workspaceId/invitations',
  operationId: 'listInvitations',
  summary: 'Invitations that can still be accepted, newest first (any member; signed-in users only)',
  description: 'Lists the invitations of a workspace that can still be accepted, newest first, for any signed-in member.',
  tags: ['workspaces'],
  access: 'auth',
  keys: 'refused',
  params: WorkspaceParams,
  query: ListInvitationsQuery,
  responses: { 200: Page(InvitationOut) },
  handler: async ({ auth, params, query, services }) => {
    requireSession(auth, 'list invitations');
    const em = services.db.em();
    await openWorkspace(em, auth, params.workspaceId);
    const now = services.clock.now();
    const limit = query.limit ?? 20;
    const after = query.cursor === undefined ? undefined : (decodeCursor(query.cursor, ['string'])[0] as string);
    const rows = await em.find(
      InvitationEntity,
      {
        workspaceId: params.workspaceId,
        status: 'pending',
        expiresAt: { $gt: new Date(now) },
        ...(after === undefined ? {} : { id: { $lt: after } }),
      },
      { orderBy: { id: 'desc' }, limit: limit + 1 },
    );
    return {
      body: pageOf(
        rows,
        limit,
        (row) => [row.id],
        (row) => toInvitationOut(row, now),
      ),
    };
  },
});
