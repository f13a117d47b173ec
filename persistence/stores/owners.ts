import { ownerAddressOf, type ShardOwnerRow } from '../cluster/leases.ts';
import type { Database } from '../database.ts';

/** The tables whose rows a request may name by id in its path, and that belong to one workspace. */
export type OwnedTable = 'generations' | 'webhook_endpoints' | 'payments' | 'api_keys';

/** The workspace of the row of `table` whose id is `id` (where a request acting on it is served, in cluster mode). */
export async function workspaceOfRow(db: Database, table: OwnedTable, id: string): Promise<string | undefined> {
  const rows = await db.em().execute<Array<{ workspace_id: string }>>(`select workspace_id from ${table} where id = ?`, [id]);
  return rows[0]?.workspace_id;
}

/** The node that holds a shard's lease now, with its address (where a request on one of its workspaces goes). */
export function ownerOfShard(db: Database, shard: number): Promise<ShardOwnerRow | undefined> {
  return ownerAddressOf(db.em(), shard);
}
