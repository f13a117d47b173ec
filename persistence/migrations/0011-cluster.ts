import { Migration } from '@mikro-orm/migrations';

/**
 * Cluster membership and shard ownership, kept in the database every node already shares (as Orleans keeps
 * its membership table in SQL), so no consensus of our own is needed.
 *
 * - `cluster_members`: one row per node id. `incarnation` changes each time a process joins under that id
 *   (Orleans' ip:port:generation), so a paused process that comes back after a restart of its id finds it
 *   is no longer the member. Heartbeats and start times come from the database's clock.
 * - `cluster_shard_leases`: one row per shard ever owned. `epoch` grows by one at every change of owner
 *   and is the fencing token: a write that carries an older epoch is refused (`cluster_fence`).
 * - `cluster_fence(node, claims, hold_limit_ms)`: raises SQLSTATE GSF01 unless every claimed shard is held
 *   by the node at the claimed epoch with an unexpired lease, and keeps a FOR SHARE lock on each lease row
 *   until the transaction ends, so no takeover can commit in between (see persistence/cluster/fence.ts).
 *   Raising (rather than returning nothing) leaves the transaction aborted in the database itself, whatever
 *   the caller does with the error.
 */
export class Migration0011Cluster extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table cluster_members (
        node_id text primary key,
        incarnation text not null,
        address text not null,
        status text not null check (status in ('joining', 'up', 'leaving', 'dead')),
        started_at timestamptz not null default clock_timestamp(),
        heartbeat_at timestamptz not null default clock_timestamp()
      )`);
    this.addSql(`
      create table cluster_shard_leases (
        shard integer primary key check (shard >= 0),
        owner_node_id text,
        owner_incarnation text,
        epoch bigint not null default 0 check (epoch >= 0),
        expires_at timestamptz,
        updated_at timestamptz not null default clock_timestamp(),
        check ((owner_node_id is null) = (expires_at is null) and (owner_node_id is null) = (owner_incarnation is null))
      )`);
    this.addSql(`
      create function cluster_fence(p_node_id text, p_claims jsonb, p_hold_limit_ms integer) returns void
      language plpgsql as $fence$
      declare
        v_claim record;
      begin
        -- A transaction that holds these locks must not sit idle for long: a paused process would otherwise
        -- hold back the takeover of its shards until it resumes. The server ends such a session (and with it
        -- the transaction) after the limit, for this transaction only.
        perform set_config('idle_in_transaction_session_timeout', greatest(p_hold_limit_ms, 1)::text, true);
        for v_claim in select c.shard, c.epoch from jsonb_to_recordset(p_claims) as c(shard integer, epoch bigint) order by c.shard loop
          perform 1 from cluster_shard_leases l
            where l.shard = v_claim.shard and l.owner_node_id = p_node_id and l.epoch = v_claim.epoch
              and l.expires_at > clock_timestamp()
            for share;
          if not found then
            raise exception 'fenced out: node % does not hold shard % at epoch %', p_node_id, v_claim.shard, v_claim.epoch
              using errcode = 'GSF01';
          end if;
        end loop;
      end
      $fence$`);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists cluster_fence(text, jsonb, integer)');
    this.addSql('drop table if exists cluster_shard_leases');
    this.addSql('drop table if exists cluster_members');
  }
}
