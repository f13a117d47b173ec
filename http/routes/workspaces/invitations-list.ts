import { Type } from '@sinclair/typebox';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { listPendingInvitations } from '../../../persistence/stores/workspaces.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
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
    const unit = openUnit(services.db);
    await openWorkspace(unit, auth, params.workspaceId);
    const now = services.clock.now();
    const limit = query.limit ?? 20;
    const after = query.cursor === undefined ? undefined : (decodeCursor(query.cursor, ['string'])[0] as string);
    const rows = await listPendingInvitations(unit, params.workspaceId, new Date(now), { after, limit: limit + 1 });
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
