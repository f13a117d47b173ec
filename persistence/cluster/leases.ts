import type { MemberIdentity } from './members.ts';
import { emOf } from '../stores/orm.ts';
import type { Unit } from '../stores/unit.ts';

/**
 * The shard leases' statements. A lease row is locked by every statement that changes it, and each change
 * is conditional on what the row holds when the lock is granted (PostgreSQL re-reads a row updated by a
 * concurrent transaction before applying the condition), so two nodes racing for one shard cannot both win.
 * Expiry is judged by the database's clock (`clock_timestamp()`, not `now()`, which is frozen at the start
 * of a transaction).
 */

export interface Lease {
  shard: number;
  epoch: number;
}

export interface LeaseRow {
  shard: number;
  ownerNodeId: string | undefined;
  ownerIncarnation: string | undefined;
  epoch: number;
  expiresAt: Date | undefined;
  /** Held and not expired, by the database's clock at the time of reading. */
  valid: boolean;
  /** Milliseconds the lease still had to run at the time of reading, by the database's clock (0 once expired or free). */
  remainingMs: number;
}

interface Row {
  shard: number;
  owner_node_id: string | null;
  owner_incarnation: string | null;
  epoch: string | number;
  expires_at: Date | string | null;
  valid: boolean;
  remaining_ms: number | string | null;
}

/** What is left of a lease, in milliseconds by the database's clock; 0 when it has expired or is free. */
const REMAINING_MS = `greatest(0, coalesce(extract(epoch from (l.expires_at - clock_timestamp())) * 1000, 0))::float8 as remaining_ms`;

function toLeaseRow(row: Row): LeaseRow {
  return {
    shard: Number(row.shard),
    ownerNodeId: row.owner_node_id ?? undefined,
    ownerIncarnation: row.owner_incarnation ?? undefined,
    epoch: Number(row.epoch),
    expiresAt: row.expires_at === null ? undefined : new Date(row.expires_at),
    valid: row.valid,
    remainingMs: Number(row.remaining_ms ?? 0),
  };
}

function toLease(row: { shard: number; epoch: string | number }): Lease {
  return { shard: Number(row.shard), epoch: Number(row.epoch) };
}

const shardsJson = (shards: Iterable<number>) => JSON.stringify([...new Set(shards)].sort((a, b) => a - b));
const leasesJson = (leases: Iterable<Lease>) => JSON.stringify([...leases].map(({ shard, epoch }) => ({ shard, epoch })).sort((a, b) => a.shard - b.shard));

/**
 * Takes each of the shards that is free, expired, or still leased to an earlier incarnation of this node
 * id, with the epoch one above the last; returns the ones taken. Rows are locked in shard order, so
 * acquirers racing over overlapping sets wait for each other instead of deadlocking.
 */
export async function acquireShards(unit: Unit, member: MemberIdentity, shards: Iterable<number>, leaseMs: number): Promise<Lease[]> {
  const em = emOf(unit);
  const rows = await em.execute<{ shard: number; epoch: string }[]>(
    `
    insert into cluster_shard_leases as l (shard, owner_node_id, owner_incarnation, epoch, expires_at, updated_at)
    select s.shard, ?, ?, 1, clock_timestamp() + ? * interval '1 millisecond', clock_timestamp()
    from (select value::integer as shard from jsonb_array_elements_text(?::jsonb)) as s
    order by s.shard
    on conflict (shard) do update set
      owner_node_id = excluded.owner_node_id, owner_incarnation = excluded.owner_incarnation,
      epoch = l.epoch + 1, expires_at = excluded.expires_at, updated_at = excluded.updated_at
    where l.owner_node_id is null or l.expires_at <= clock_timestamp()
      or (l.owner_node_id = excluded.owner_node_id and l.owner_incarnation <> excluded.owner_incarnation)
    returning l.shard, l.epoch`,
    [member.nodeId, member.incarnation, leaseMs, shardsJson(shards)],
  );
  return rows.map(toLease).sort((a, b) => a.shard - b.shard);
}

/**
 * Extends the leases this incarnation still holds at the same epoch and that have not expired; returns
 * those renewed with their new expiry. A lease missing from the answer is lost (taken, or expired first).
 */
export async function renewLeases(unit: Unit, member: MemberIdentity, leases: Iterable<Lease>, leaseMs: number): Promise<Lease[]> {
  const em = emOf(unit);
  const rows = await em.execute<{ shard: number; epoch: string }[]>(
    `
    update cluster_shard_leases as l set expires_at = clock_timestamp() + ? * interval '1 millisecond', updated_at = clock_timestamp()
    from jsonb_to_recordset(?::jsonb) as c(shard integer, epoch bigint)
    where l.shard = c.shard and l.epoch = c.epoch and l.owner_node_id = ? and l.owner_incarnation = ?
      and l.expires_at > clock_timestamp()
    returning l.shard, l.epoch`,
    [leaseMs, leasesJson(leases), member.nodeId, member.incarnation],
  );
  return rows.map(toLease).sort((a, b) => a.shard - b.shard);
}

/** Gives a shard up (free for anyone to acquire, at the next epoch); false if it was no longer held. */
export async function releaseShard(unit: Unit, member: MemberIdentity, lease: Lease): Promise<boolean> {
  const em = emOf(unit);
  const rows = await em.execute<{ shard: number }[]>(
    `
    update cluster_shard_leases set owner_node_id = null, owner_incarnation = null, expires_at = null, updated_at = clock_timestamp()
    where shard = ? and epoch = ? and owner_node_id = ? and owner_incarnation = ?
    returning shard`,
    [lease.shard, lease.epoch, member.nodeId, member.incarnation],
  );
  return rows.length === 1;
}

/**
 * Releases every lease still in this incarnation's name, including any handed to it that it had not yet
 * adopted (a member leaving while another hands it shards); returns the shards released.
 */
export async function releaseAllShards(unit: Unit, member: MemberIdentity): Promise<number[]> {
  const em = emOf(unit);
  const rows = await em.execute<{ shard: number }[]>(
    `
    update cluster_shard_leases set owner_node_id = null, owner_incarnation = null, expires_at = null, updated_at = clock_timestamp()
    where owner_node_id = ? and owner_incarnation = ?
    returning shard`,
    [member.nodeId, member.incarnation],
  );
  return rows.map((row) => Number(row.shard)).sort((a, b) => a - b);
}

/**
 * Passes a held shard straight to another live member (at the next epoch, with a fresh lease in its
 * incarnation's name), so it never stands free in between. Returns the new lease, or undefined if the
 * shard was no longer held or the member is not `up`.
 */
export async function handOverShard(unit: Unit, from: MemberIdentity, lease: Lease, toNodeId: string, leaseMs: number): Promise<Lease | undefined> {
  const em = emOf(unit);
  const rows = await em.execute<{ shard: number; epoch: string }[]>(
    `
    update cluster_shard_leases as l set owner_node_id = m.node_id, owner_incarnation = m.incarnation, epoch = l.epoch + 1,
      expires_at = clock_timestamp() + ? * interval '1 millisecond', updated_at = clock_timestamp()
    from cluster_members m
    where m.node_id = ? and m.status = 'up'
      and l.shard = ? and l.epoch = ? and l.owner_node_id = ? and l.owner_incarnation = ? and l.expires_at > clock_timestamp()
    returning l.shard, l.epoch`,
    [leaseMs, toNodeId, lease.shard, lease.epoch, from.nodeId, from.incarnation],
  );
  return rows[0] ? toLease(rows[0]) : undefined;
}

/** Every lease row, in shard order. */
export async function listLeases(unit: Unit): Promise<LeaseRow[]> {
  const em = emOf(unit);
  const rows = await em.execute<Row[]>(`
    select shard, owner_node_id, owner_incarnation, epoch, expires_at,
      (owner_node_id is not null and expires_at > clock_timestamp()) as valid, ${REMAINING_MS}
    from cluster_shard_leases l order by shard`);
  return rows.map(toLeaseRow);
}

/** The member holding a valid lease on a shard, where it is reached, and how long its lease still runs. */
export interface ShardOwnerRow {
  nodeId: string;
  address: string;
  epoch: number;
  /** Milliseconds the lease still had to run at the time of reading, by the database's clock. */
  remainingMs: number;
}

/** The live member (`up` or `leaving`) holding a valid lease on shard, if any (for forwarding requests to it). */
export async function ownerAddressOf(unit: Unit, shard: number): Promise<ShardOwnerRow | undefined> {
  const em = emOf(unit);
  const rows = await em.execute<Array<{ node_id: string; address: string; epoch: string | number; remaining_ms: number | string }>>(
    `select m.node_id, m.address, l.epoch, ${REMAINING_MS} from cluster_shard_leases l
       join cluster_members m on m.node_id = l.owner_node_id and m.incarnation = l.owner_incarnation
     where l.shard = ? and l.expires_at > clock_timestamp() and m.status in ('up', 'leaving')`,
    [shard],
  );
  const row = rows[0];
  return row ? { nodeId: row.node_id, address: row.address, epoch: Number(row.epoch), remainingMs: Number(row.remaining_ms) } : undefined;
}
