import { emOf } from '../stores/orm.ts';
import type { Unit } from '../stores/unit.ts';

/** The membership table's statements. Every time is the database's (`clock_timestamp()`), never a node's. */

export type MemberStatus = 'joining' | 'up' | 'leaving' | 'dead';

export interface Member {
  nodeId: string;
  incarnation: string;
  address: string;
  status: MemberStatus;
  startedAt: Date;
  heartbeatAt: Date;
  /** Milliseconds since its last heartbeat, by the database's clock. */
  silentMs: number;
}

export interface MemberIdentity {
  nodeId: string;
  /** Changes each time a process joins under nodeId: a row with another incarnation is someone else's. */
  incarnation: string;
}

interface MemberRow {
  node_id: string;
  incarnation: string;
  address: string;
  status: MemberStatus;
  started_at: Date | string;
  heartbeat_at: Date | string;
  silent_ms: number | string;
}

const MEMBER_COLUMNS = `node_id, incarnation, address, status, started_at, heartbeat_at,
  (extract(epoch from (clock_timestamp() - heartbeat_at)) * 1000)::float8 as silent_ms`;

function toMember(row: MemberRow): Member {
  return {
    nodeId: row.node_id,
    incarnation: row.incarnation,
    address: row.address,
    status: row.status,
    startedAt: new Date(row.started_at),
    heartbeatAt: new Date(row.heartbeat_at),
    silentMs: Number(row.silent_ms),
  };
}

/**
 * Writes this process in as the member nodeId, status `joining` (or the one given). A row left under the
 * same id by an earlier process is taken over: its incarnation is replaced, so that process, if it still
 * runs, learns at its next heartbeat that it is no longer a member.
 */
export async function joinCluster(unit: Unit, member: MemberIdentity & { address: string; status?: 'joining' | 'up' }): Promise<Member> {
  const em = emOf(unit);
  const rows = await em.execute<MemberRow[]>(
    `
    insert into cluster_members (node_id, incarnation, address, status, started_at, heartbeat_at)
    values (?, ?, ?, ?, clock_timestamp(), clock_timestamp())
    on conflict (node_id) do update set incarnation = excluded.incarnation, address = excluded.address,
      status = excluded.status, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at
    returning ${MEMBER_COLUMNS}`,
    [member.nodeId, member.incarnation, member.address, member.status ?? 'joining'],
  );
  return toMember(rows[0]!);
}

/**
 * Records that the member is alive. Returns its status, or undefined when the row is no longer this
 * incarnation's or it was declared dead: the process is then out of the cluster and must rejoin.
 */
export async function heartbeat(unit: Unit, member: MemberIdentity): Promise<MemberStatus | undefined> {
  const em = emOf(unit);
  const rows = await em.execute<{ status: MemberStatus }[]>(
    `
    update cluster_members set heartbeat_at = clock_timestamp()
    where node_id = ? and incarnation = ? and status <> 'dead'
    returning status`,
    [member.nodeId, member.incarnation],
  );
  return rows[0]?.status;
}

/** Moves a live member to `up` or `leaving`; false when it is no longer this incarnation's or was declared dead. */
export async function setMemberStatus(unit: Unit, member: MemberIdentity, status: 'up' | 'leaving'): Promise<boolean> {
  const em = emOf(unit);
  const rows = await em.execute<{ node_id: string }[]>(
    `
    update cluster_members set status = ?, heartbeat_at = clock_timestamp()
    where node_id = ? and incarnation = ? and status <> 'dead'
    returning node_id`,
    [status, member.nodeId, member.incarnation],
  );
  return rows.length === 1;
}

/** Removes the member's row (a graceful stop, after its shards are handed over). */
export async function leaveCluster(unit: Unit, member: MemberIdentity): Promise<void> {
  const em = emOf(unit);
  await em.execute('delete from cluster_members where node_id = ? and incarnation = ?', [member.nodeId, member.incarnation]);
}

/** Every member row, dead ones included, oldest first. */
export async function listMembers(unit: Unit): Promise<Member[]> {
  const em = emOf(unit);
  const rows = await em.execute<MemberRow[]>(`select ${MEMBER_COLUMNS} from cluster_members order by started_at, node_id`);
  return rows.map(toMember);
}

/**
 * Members that shards may be assigned to: those `up`. A silent member stays in this list until someone
 * declares it dead (run declareDead first), so its shards are taken only once it is marked dead, and it
 * then finds out at its next heartbeat instead of carrying on as a member without shards.
 */
export async function listLiveMembers(unit: Unit): Promise<Member[]> {
  const em = emOf(unit);
  const rows = await em.execute<MemberRow[]>(`select ${MEMBER_COLUMNS} from cluster_members where status = 'up' order by node_id`);
  return rows.map(toMember);
}

/**
 * Members that may hold shards: those `up` and those `leaving` (handing theirs over), by node id. The
 * ones `up` are listLiveMembers' answer; those `leaving` still serve the shards they have not yet handed over.
 */
export async function listActiveMembers(unit: Unit): Promise<Member[]> {
  const em = emOf(unit);
  const rows = await em.execute<MemberRow[]>(`select ${MEMBER_COLUMNS} from cluster_members where status in ('up', 'leaving') order by node_id`);
  return rows.map(toMember);
}

/**
 * Marks dead every member not heard from for deadAfterMs; returns their ids. Any member may run it (the
 * statement is idempotent); a member so marked cannot heartbeat again and must rejoin as a new incarnation.
 */
export async function declareDead(unit: Unit, deadAfterMs: number): Promise<string[]> {
  const em = emOf(unit);
  const rows = await em.execute<{ node_id: string }[]>(
    `
    update cluster_members set status = 'dead'
    where status <> 'dead' and heartbeat_at <= clock_timestamp() - ? * interval '1 millisecond'
    returning node_id`,
    [deadAfterMs],
  );
  return rows.map((row) => row.node_id).sort();
}

/** Deletes the rows of members dead for longer than olderThanMs (kept until then for diagnosis). */
export async function purgeDead(unit: Unit, olderThanMs: number): Promise<number> {
  const em = emOf(unit);
  const rows = await em.execute<{ node_id: string }[]>(
    `
    delete from cluster_members
    where status = 'dead' and heartbeat_at <= clock_timestamp() - ? * interval '1 millisecond'
    returning node_id`,
    [olderThanMs],
  );
  return rows.length;
}
