import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { PlanBook } from '../../domain/plans.ts';
import type { Database } from '../../persistence/database.ts';
import { findKeyByHash, type KeyAuthRow } from '../../persistence/stores/keys.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import type { Principal, Scope } from './principal.ts';
import { Lru } from '../../runtime/lru.ts';

/** What authenticating a key needs, cached by the SHA-256 of its plaintext. */
export interface KeyRecord {
  id: string;
  workspaceId: string;
  scopes: ReadonlySet<Scope>;
  /** Milliseconds, or null for a key that does not expire. */
  expiresAt: number | null;
  revoked: boolean;
  /** From the workspace's plan when the record was loaded. */
  requestsPerMinute: number;
  /** ctx.auth for requests made with this key; made once, shared, never mutated. */
  principal: Readonly<Extract<Principal, { kind: 'key' }>>;
}

/** Tells the other nodes to drop a key hash (Redis pub/sub when REDIS_URL is set). */
export interface KeyInvalidationBus {
  publish(keyHash: string): Promise<void>;
}

export interface KeyCacheOptions {
  db: Database;
  clock: Clock;
  logger: Logger;
  /** The plans served now (the catalog): a key's rate limit is its workspace plan's. */
  plans(): PlanBook;
  bus?: KeyInvalidationBus;
  maxEntries?: number;
  ttlMs?: number;
}

interface Entry {
  record: KeyRecord | null;
  loadedAt: number;
}

/**
 * Key records in memory, so authenticating a key is a hash and a map lookup. Entries live at most
 * ttlMs (60 s), and are dropped at once when a key is changed (invalidate). Unknown hashes are
 * remembered too, in their own bounded map, so a flood of made-up keys does not reach the database
 * or push real keys out.
 */
export class KeyCache {
  private readonly known: Lru<string, Entry>;
  private readonly unknown: Lru<string, Entry>;
  private readonly loading = new Map<string, Promise<KeyRecord | null>>();
  /** Bumped by every drop; a load that started before a drop does not fill the cache with what it read. */
  private epoch = 0;
  private readonly ttlMs: number;

  constructor(private readonly options: KeyCacheOptions) {
    this.known = new Lru(options.maxEntries ?? 10_000);
    this.unknown = new Lru(options.maxEntries ?? 10_000);
    this.ttlMs = options.ttlMs ?? 60_000;
  }

  /** The key with this hash, from memory when fresh, else from the database; null when there is none. */
  lookup(keyHash: string): Promise<KeyRecord | null> | KeyRecord | null {
    const now = this.options.clock.now();
    const entry = this.known.get(keyHash) ?? this.unknown.get(keyHash);
    if (entry && now - entry.loadedAt < this.ttlMs) return entry.record;
    let pending = this.loading.get(keyHash);
    if (!pending) {
      pending = this.load(keyHash, now).finally(() => {
        if (this.loading.get(keyHash) === pending) this.loading.delete(keyHash);
      });
      this.loading.set(keyHash, pending);
    }
    return pending;
  }

  /** Drops a key here and, through the bus, on every other node. Call it after the change is committed. */
  async invalidate(keyHash: string): Promise<void> {
    this.drop(keyHash);
    if (!this.options.bus) return;
    try {
      await this.options.bus.publish(keyHash);
    } catch (error) {
      this.options.logger.warn({ err: error }, 'could not publish an API key invalidation; other nodes keep the old record for at most the cache TTL');
    }
  }

  /** Drops a key on this node only (what the bus's subscriber calls). */
  drop(keyHash: string): void {
    this.epoch++;
    this.known.delete(keyHash);
    this.unknown.delete(keyHash);
    this.loading.delete(keyHash);
  }

  /** Drops everything, e.g. when a workspace changes plan and its keys' limits change. */
  clear(): void {
    this.epoch++;
    this.known.clear();
    this.unknown.clear();
    this.loading.clear();
  }

  get size(): number {
    return this.known.size;
  }

  private async load(keyHash: string, now: number): Promise<KeyRecord | null> {
    const epoch = this.epoch;
    const row = await findKeyByHash(openUnit(this.options.db), keyHash);
    const record = row ? this.toRecord(row) : null;
    if (epoch === this.epoch) (record ? this.known : this.unknown).set(keyHash, { record, loadedAt: now });
    return record;
  }

  private toRecord(row: KeyAuthRow): KeyRecord {
    const scopes = (typeof row.scopes === 'string' ? JSON.parse(row.scopes) : row.scopes) as Scope[];
    return {
      principal: Object.freeze({ kind: 'key' as const, keyId: row.id, workspaceId: row.workspace_id, scopes: Object.freeze([...scopes]) as Scope[] }),
      id: row.id,
      workspaceId: row.workspace_id,
      scopes: new Set(scopes),
      expiresAt: row.expires_at === null ? null : new Date(row.expires_at).getTime(),
      revoked: row.revoked_at !== null,
      requestsPerMinute: this.options.plans().plan(row.plan).requestsPerMinute,
    };
  }
}
