import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import {
  acquireShards,
  declareDead,
  handOverShard,
  heartbeat,
  joinCluster,
  leaveCluster,
  listActiveMembers,
  listLeases,
  releaseAllShards,
  releaseShard,
  renewLeases,
  setMemberStatus,
  type Lease,
  type LeaseRow,
  type MemberIdentity,
} from '../../persistence/cluster/index.ts';
import { systemClock, type Clock, type Timer } from '../clock.ts';
import type { Database } from '../../persistence/database.ts';
import { openUnit, type Unit } from '../../persistence/stores/unit.ts';
import type { Logger } from '../logger.ts';
import { assignShards } from './assignment.ts';

export interface ClusterTimings {
  /** Between two rounds of heartbeat, lease renewal and rebalancing. */
  heartbeatMs: number;
  /** A member not heard from for this long is dead: its shards go to the others. */
  deadAfterMs: number;
  /** How long an acquired or renewed lease lasts without renewal. */
  leaseMs: number;
}

export interface ClusterNodeOptions extends ClusterTimings {
  db: Database;
  nodeId: string;
  /** Where the other nodes reach this one (host:port of the internal channel). */
  address: string;
  shardCount: number;
  /** Local time and timers: only for scheduling rounds and for this process's view of its leases' deadlines. */
  clock?: Clock;
  logger?: Logger;
  /** Rounds run on their own every heartbeatMs (default); false: only when tick() is called (tests). */
  autoTick?: boolean;
  /**
   * Called before the node gives a shard up on purpose (rebalance or graceful stop); the lease is kept, and
   * renewed, until it resolves. The place to stop accepting work for the shard and flush its actors.
   */
  drain?: (lease: Lease) => Promise<void> | void;
}

/**
 * Why a shard was lost: `handed-over` to another member (at the next epoch), `released` (free for anyone),
 * `lease-lost` (expired, or taken, before this node could renew it: stop its work now, writes are fenced
 * anyway), `expelled` (this node was declared dead or its id was taken over by another process).
 */
export type ShardLossReason = 'handed-over' | 'released' | 'lease-lost' | 'expelled';

/** The member holding a shard's lease as a round read it, where it is reached, and until when that is known to hold. */
export interface KnownOwner {
  nodeId: string;
  /** Its internal address (host:port). */
  address: string;
  epoch: number;
  /** Local time (this node's clock) at which the lease as read expires unless renewed. */
  validUntil: number;
}

export interface ClusterNodeEvents {
  /** The node now owns the shard at this epoch: recover its work, and carry the epoch on its writes. */
  gained: [lease: Lease];
  lost: [lease: Lease, reason: ShardLossReason];
  /** Out of the cluster (declared dead while paused, or its id joined elsewhere); it rejoins as a new incarnation. */
  expelled: [];
  /** Members this node has just declared dead. */
  dead: [nodeIds: string[]];
  /** A round failed (database unreachable…); the next round tries again. */
  'round-failed': [error: unknown];
  /**
   * Every shard's owner as this round read the table (shards without a valid lease held by an `up` or
   * `leaving` member are missing): for routing requests without asking the database each time.
   */
  owners: [owners: ReadonlyMap<number, KnownOwner>];
}

type Phase = 'idle' | 'joining' | 'up' | 'leaving' | 'stopped';

interface HeldLease extends Lease {
  /** Local time past which this process no longer counts on the lease (renewal time + leaseMs, measured from before the request). */
  deadline: number;
}

/**
 * One node of the cluster: membership through the members table, ownership of shards through leases.
 * Each round (every heartbeatMs): forget leases whose local deadline passed, heartbeat, declare silent
 * members dead, renew the leases held, then compare the shards held with the assignment computed from the
 * live members and current owners: acquire the free ones assigned here, adopt those handed over here, and
 * hand over (after `drain`) the ones assigned elsewhere. It does not route or stop actors itself: it
 * reports `gained` and `lost`, and answers `owns(shard)`.
 */
export class ClusterNode extends EventEmitter<ClusterNodeEvents> {
  readonly nodeId: string;
  private incarnation = '';
  private phase: Phase = 'idle';
  private readonly held = new Map<number, HeldLease>();
  private readonly handingOver = new Map<number, Promise<void>>();
  private readonly clock: Clock;
  private timer: Timer | undefined;
  private closing = false;
  private rounds: Promise<void> = Promise.resolve();

  constructor(private readonly options: ClusterNodeOptions) {
    super();
    if (!(options.heartbeatMs > 0 && options.leaseMs > options.heartbeatMs && options.deadAfterMs > options.heartbeatMs)) {
      throw new RangeError('cluster timings: leaseMs and deadAfterMs must each be longer than heartbeatMs');
    }
    this.nodeId = options.nodeId;
    this.clock = options.clock ?? systemClock;
  }

  get status(): Phase {
    return this.phase;
  }

  /** This process's identity in the members table (its incarnation changes at each join). */
  get identity(): MemberIdentity {
    return { nodeId: this.nodeId, incarnation: this.incarnation };
  }

  /** The lease on shard if this node holds it and its deadline has not passed locally; undefined otherwise. */
  owns(shard: number): Lease | undefined {
    const lease = this.held.get(shard);
    if (!lease || lease.deadline <= this.clock.now()) return undefined;
    return { shard, epoch: lease.epoch };
  }

  /** Shards held now, in order, with their epochs. */
  ownedShards(): Lease[] {
    return [...this.held.keys()]
      .sort((a, b) => a - b)
      .map((shard) => this.owns(shard))
      .filter((lease) => lease !== undefined);
  }

  /** Whether the shard is being drained before a handover (new work for it should wait or be refused). */
  isHandingOver(shard: number): boolean {
    return this.handingOver.has(shard);
  }

  /** Writes this process in as `joining`: it heartbeats but takes no shard until up(). */
  async join(): Promise<void> {
    if (this.phase !== 'idle') throw new Error(`cannot join: node is ${this.phase}`);
    this.incarnation = randomUUID();
    await joinCluster(openUnit(this.options.db), { ...this.identity, address: this.options.address, status: 'joining' });
    this.phase = 'joining';
    this.schedule();
  }

  /** Ready to own shards: marks the member `up` and runs a round at once. */
  async up(): Promise<void> {
    if (this.phase !== 'joining') throw new Error(`cannot go up: node is ${this.phase}`);
    await setMemberStatus(openUnit(this.options.db), this.identity, 'up');
    this.phase = 'up';
    await this.tick();
  }

  async start(): Promise<void> {
    await this.join();
    await this.up();
  }

  /** Runs one round now (after any round in progress). */
  tick(): Promise<void> {
    const round = this.rounds.then(() => this.round());
    this.rounds = round.catch(() => {});
    return round;
  }

  /**
   * Graceful stop: marks the member `leaving` (the others stop assigning it shards), drains and hands each
   * shard over to the member the assignment gives it to (or releases it when no other member is up),
   * then deletes the member row. Leases keep being renewed until each is handed over.
   */
  async stop(): Promise<void> {
    if (this.phase === 'idle' || this.phase === 'stopped') {
      this.phase = 'stopped';
      return;
    }
    this.phase = 'leaving';
    await this.rounds;
    await Promise.allSettled(this.handingOver.values());
    const em = openUnit(this.options.db);
    if (await setMemberStatus(em, this.identity, 'leaving')) {
      const { live, owners } = await this.view(em);
      const others = live.filter((node) => node !== this.nodeId);
      const targets = assignShards(
        this.options.shardCount,
        others,
        owners.map((owner) => (owner === this.nodeId ? undefined : owner)),
      );
      for (const lease of this.ownedShards()) this.giveUp(lease, targets[lease.shard]);
      await Promise.allSettled(this.handingOver.values());
    }
    this.closing = true;
    this.timer?.cancel();
    this.timer = undefined;
    await this.rounds;
    for (const lease of [...this.held.values()]) {
      this.lose(lease, (await releaseShard(em, this.identity, lease)) ? 'released' : 'lease-lost');
    }
    await releaseAllShards(em, this.identity);
    await leaveCluster(em, this.identity);
    this.phase = 'stopped';
  }

  private schedule(): void {
    if (this.options.autoTick === false || this.closing) return;
    this.timer = this.clock.setTimer(() => {
      this.timer = undefined;
      void this.tick()
        .catch(() => {})
        .finally(() => {
          if (this.timer === undefined) this.schedule();
        });
    }, this.options.heartbeatMs);
  }

  private async round(): Promise<void> {
    if (this.phase === 'idle' || this.phase === 'stopped') return;
    try {
      this.forgetPastDeadline();
      const em = openUnit(this.options.db);
      const status = await heartbeat(em, this.identity);
      if (status === undefined) {
        await this.rejoin(em);
        return;
      }
      const dead = await declareDead(em, this.options.deadAfterMs);
      if (dead.length > 0) {
        this.options.logger?.warn({ nodeId: this.nodeId, dead }, 'cluster members declared dead');
        this.emit('dead', dead);
      }
      await this.renew(em, [...this.held.values()]);
      if (this.phase === 'up') await this.rebalance(em);
    } catch (error) {
      this.options.logger?.warn({ err: error, nodeId: this.nodeId }, 'cluster round failed');
      this.emit('round-failed', error);
      throw error;
    }
  }

  private forgetPastDeadline(): void {
    const now = this.clock.now();
    for (const lease of [...this.held.values()]) {
      if (lease.deadline <= now) this.lose(lease, 'lease-lost');
    }
  }

  /** Declared dead, or the id joined from elsewhere: every lease is gone; come back as a new incarnation. */
  private async rejoin(em: Unit): Promise<void> {
    this.options.logger?.warn({ nodeId: this.nodeId }, 'expelled from the cluster; rejoining');
    this.loseAll('expelled');
    this.emit('expelled');
    if (this.phase === 'leaving') return;
    this.incarnation = randomUUID();
    await joinCluster(em, { ...this.identity, address: this.options.address, status: this.phase === 'up' ? 'up' : 'joining' });
  }

  private async renew(em: Unit, leases: HeldLease[]): Promise<void> {
    if (leases.length === 0) return;
    const sentAt = this.clock.now();
    const renewed = new Set((await renewLeases(em, this.identity, leases, this.options.leaseMs)).map((lease) => `${lease.shard}:${lease.epoch}`));
    for (const lease of leases) {
      if (this.held.get(lease.shard) !== lease) continue;
      if (renewed.has(`${lease.shard}:${lease.epoch}`)) lease.deadline = sentAt + this.options.leaseMs;
      // A shard being given up may have been handed over between this renewal's read and now: its handover
      // says what became of it (handed over, released or lost), and its local deadline still bounds it.
      else if (!this.handingOver.has(lease.shard)) this.lose(lease, 'lease-lost');
    }
  }

  private async view(em: Unit): Promise<{ live: string[]; owners: (string | undefined)[]; rows: Map<number, LeaseRow>; known: Map<number, KnownOwner> }> {
    const sentAt = this.clock.now();
    const [members, leases] = await Promise.all([listActiveMembers(em), listLeases(openUnit(this.options.db))]);
    const owners: (string | undefined)[] = Array.from({ length: this.options.shardCount }, () => undefined);
    const rows = new Map<number, LeaseRow>();
    const known = new Map<number, KnownOwner>();
    const byId = new Map(members.map((member) => [member.nodeId, member]));
    for (const row of leases) {
      if (row.shard >= this.options.shardCount) continue;
      rows.set(row.shard, row);
      if (!row.valid) continue;
      owners[row.shard] = row.ownerNodeId;
      // As ownerAddressOf: the holder must be the member's current incarnation, up or leaving.
      const member = byId.get(row.ownerNodeId!);
      if (member && member.incarnation === row.ownerIncarnation) {
        known.set(row.shard, { nodeId: member.nodeId, address: member.address, epoch: row.epoch, validUntil: sentAt + row.remainingMs });
      }
    }
    return { live: members.filter((member) => member.status === 'up').map((member) => member.nodeId), owners, rows, known };
  }

  private async rebalance(em: Unit): Promise<void> {
    const { live, owners, rows, known } = await this.view(em);
    this.emit('owners', known);
    if (!live.includes(this.nodeId)) return;
    const targets = assignShards(this.options.shardCount, live, owners);

    for (const lease of this.ownedShards()) {
      const target = targets[lease.shard];
      if (target !== this.nodeId && !this.handingOver.has(lease.shard)) this.giveUp(lease, target);
    }

    const toAcquire: number[] = [];
    const handedHere: HeldLease[] = [];
    for (let shard = 0; shard < this.options.shardCount; shard++) {
      if (targets[shard] !== this.nodeId || this.held.has(shard)) continue;
      const row = rows.get(shard);
      if (!row?.valid || (row.ownerNodeId === this.nodeId && row.ownerIncarnation !== this.incarnation)) {
        toAcquire.push(shard);
      } else if (row.ownerNodeId === this.nodeId) {
        // Handed over to this incarnation by its previous owner: counted as held once renewed below.
        handedHere.push({ shard, epoch: row.epoch, deadline: -Infinity });
      }
    }

    if (handedHere.length > 0) {
      const sentAt = this.clock.now();
      for (const lease of await renewLeases(em, this.identity, handedHere, this.options.leaseMs)) {
        this.gain(lease, sentAt);
      }
    }
    if (toAcquire.length > 0) {
      const sentAt = this.clock.now();
      for (const lease of await acquireShards(em, this.identity, toAcquire, this.options.leaseMs)) this.gain(lease, sentAt);
    }
  }

  private gain(lease: Lease, sentAt: number): void {
    this.held.set(lease.shard, { ...lease, deadline: sentAt + this.options.leaseMs });
    this.emit('gained', { shard: lease.shard, epoch: lease.epoch });
  }

  private lose(lease: Lease, reason: ShardLossReason): void {
    if (this.held.get(lease.shard)?.epoch !== lease.epoch) return;
    this.held.delete(lease.shard);
    this.emit('lost', { shard: lease.shard, epoch: lease.epoch }, reason);
  }

  private loseAll(reason: ShardLossReason): void {
    for (const lease of [...this.held.values()]) this.lose(lease, reason);
  }

  /** Drains the shard, then hands it to target (or releases it when there is none or the handover fails). */
  private giveUp(lease: Lease, target: string | undefined): void {
    if (this.handingOver.has(lease.shard)) return;
    const work = (async () => {
      try {
        await this.options.drain?.(lease);
        const em = openUnit(this.options.db);
        if (target !== undefined && target !== this.nodeId && (await handOverShard(em, this.identity, lease, target, this.options.leaseMs))) {
          this.lose(lease, 'handed-over');
        } else if (await releaseShard(em, this.identity, lease)) {
          this.lose(lease, 'released');
        } else {
          this.lose(lease, 'lease-lost');
        }
      } catch (error) {
        this.options.logger?.warn({ err: error, nodeId: this.nodeId, shard: lease.shard }, 'shard handover failed; kept until the next round');
      } finally {
        this.handingOver.delete(lease.shard);
      }
    })();
    this.handingOver.set(lease.shard, work);
  }
}
