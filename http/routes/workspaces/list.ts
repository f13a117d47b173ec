import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { decodeCursor, Page, PageQueryFields, pageOf } from '../../pagination.ts';
import { findWorkspace, findWorkspaces, listMemberships } from '../../../persistence/stores/workspaces.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { toWorkspaceOut, WorkspaceOut } from './shapes.ts';

const ListWorkspacesQuery = Type.Object(
  {
    ...PageQueryFields,
    workspaceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Only this workspace; an API key must send its own.' })),
  },
  { additionalProperties: false },
);

export const listWorkspaces = defineRoute({
  method: 'GET',
  path: '/v1/workspaces',
  operationId: 'listWorkspaces',
  summary: "The caller's workspaces with the caller's role, newest first; an API key sees only its own workspace",
  description:
    'Lists the workspaces the signed-in user belongs to, with their role in each, newest first. An API key sees only its own workspace, and must name it in workspaceId.',
  tags: ['workspaces'],
  access: 'auth',
  query: ListWorkspacesQuery,
  responses: { 200: Page(WorkspaceOut) },
  handler: async ({ auth, query, services }) => {
    if (!auth) throw new ApiError('unauthenticated');
    const unit = openUnit(services.db);
    const limit = query.limit ?? 20;
    const after = query.cursor === undefined ? undefined : (decodeCursor(query.cursor, ['string'])[0] as string);

    if (auth.kind === 'key') {
      if (query.workspaceId !== undefined && query.workspaceId !== auth.workspaceId)
        throw new ApiError('forbidden', 'This API key belongs to another workspace.');
      const workspace = after === undefined ? await findWorkspace(unit, auth.workspaceId) : null;
      return { body: { data: workspace ? [toWorkspaceOut(workspace, null)] : [], nextCursor: null } };
    }

    // Workspace ids are time-sortable, so id order is creation order: keyset on the id alone.
    const memberships = await listMemberships(unit, auth.userId, { after, only: query.workspaceId, limit: limit + 1 });
    const workspaces = new Map(
      (
        await findWorkspaces(
          unit,
          memberships.map((m) => m.workspaceId),
        )
      ).map((w) => [w.id, w]),
    );
    const rows = memberships.flatMap((m) => {
      const workspace = workspaces.get(m.workspaceId);
      return workspace ? [{ workspace, role: m.role }] : [];
    });
    return {
      body: pageOf(
        rows,
        limit,
        (row) => [row.workspace.id],
        (row) => toWorkspaceOut(row.workspace, row.role),
      ),
    };
  },
});
