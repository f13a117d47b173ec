import type { OwnerOf } from './route.ts';
import { workspaceOfRow as ownerOfRow, type OwnedTable } from '../persistence/stores/owners.ts';

/** The workspace a request names (path :workspaceId, query or body workspaceId), if it names one as text. */
export const namedWorkspace: OwnerOf = ({ params, query, body }) => {
  if (typeof params.workspaceId === 'string') return params.workspaceId;
  if (typeof query.workspaceId === 'string') return query.workspaceId;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const named = (body as { workspaceId?: unknown }).workspaceId;
    if (typeof named === 'string') return named;
  }
  return undefined;
};

/** The workspace of the row of `table` whose id is the path parameter `param` (a generation, a webhook endpoint, a payment, an API key). */
export function workspaceOfRow(table: OwnedTable, param = 'id'): OwnerOf {
  return async ({ params, db }) => {
    const id = params[param];
    if (typeof id !== 'string' || id.length > 128) return undefined;
    return ownerOfRow(db, table, id);
  };
}
