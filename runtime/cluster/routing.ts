import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { ShardHost } from './shard-host.ts';
import type { ClusterNode } from './cluster-node.ts';
import type { ShardOwners } from './shard-owners.ts';

/** The header a node puts on a request it forwards to the owner of the request's workspace. */
export const FORWARDED_HEADER = 'x-cluster-forwarded';
/** How long a forwarded request's signature stays valid (the nodes' clocks may drift a little). */
const MAX_SKEW_MS = 60_000;

export type Placement =
  | { kind: 'here' }
  /** Owned by another live node, reachable at address. */
  | RemotePlacement
  /** No node holds it right now (failover in progress), or this node is handing it over. */
  | { kind: 'unavailable' };

/** A workspace owned by another live node (as far as this node knows), reachable at address. */
export interface RemotePlacement {
  kind: 'remote';
  shard: number;
  nodeId: string;
  address: string;
}

/** Where a workspace's requests are served, and the signature of the requests forwarded between nodes. */
export class ClusterRouting {
  constructor(
    private readonly owners: ShardOwners,
    private readonly node: ClusterNode,
    private readonly host: ShardHost,
    private readonly secret: string,
    private readonly now: () => number = Date.now,
  ) {}

  get nodeId(): string {
    return this.node.nodeId;
  }

  async placement(workspaceId: string): Promise<Placement> {
    const shard = this.host.shardOf(workspaceId);
    if (this.node.owns(shard)) return this.node.isHandingOver(shard) ? { kind: 'unavailable' } : { kind: 'here' };
    const owner = await this.owners.ownerOf(shard);
    if (!owner || owner.nodeId === this.node.nodeId) return { kind: 'unavailable' };
    return { kind: 'remote', shard, nodeId: owner.nodeId, address: owner.address };
  }

  /**
   * A request forwarded to placement's node could not be served there: the node could not be reached, or
   * answered 503 (it does not run the workspace any more, or cannot now). Its owner is looked up again next time.
   */
  forwardFailed(placement: RemotePlacement): void {
    this.owners.forget(placement.shard, placement.nodeId);
  }

  /**
   * The value of FORWARDED_HEADER for a request: `<ms>.<node id>.<hmac>`, the HMAC binding the time, the
   * node, the method, the target and the SHA-256 of the exact body bytes sent (none: the empty body's).
   */
  sign(method: string, target: string, body: Uint8Array | string | undefined): string {
    const at = String(this.now());
    return `${at}.${this.node.nodeId}.${this.mac(at, this.node.nodeId, method, target, bodyDigest(body))}`;
  }

  /**
   * Whether the header was made by a node holding the shared secret, recently, for this method, target and
   * body: the bytes received, so a body altered on the way (or a header moved onto another body) fails.
   */
  verify(header: string, method: string, target: string, body: Uint8Array | string | undefined): boolean {
    const match = /^(\d{1,16})\.([A-Za-z0-9._:-]{1,128})\.([0-9a-f]{64})$/.exec(header);
    if (!match) return false;
    const [, at, nodeId, mac] = match;
    if (Math.abs(this.now() - Number(at)) > MAX_SKEW_MS) return false;
    return timingSafeEqual(Buffer.from(mac!, 'hex'), Buffer.from(this.mac(at!, nodeId!, method, target, bodyDigest(body)), 'hex'));
  }

  private mac(at: string, nodeId: string, method: string, target: string, digest: string): string {
    return createHmac('sha256', this.secret).update(`${at}\n${nodeId}\n${method}\n${target}\n${digest}`).digest('hex');
  }
}

/** SHA-256 (hex) of a body's bytes; a string is taken as its UTF-8 bytes, no body as the empty one. */
function bodyDigest(body: Uint8Array | string | undefined): string {
  return createHash('sha256')
    .update(body ?? '')
    .digest('hex');
}
