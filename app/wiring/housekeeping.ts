import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import type { Database } from '../../persistence/database.ts';
import type { OwnedShards } from '../../persistence/cluster/shard-sql.ts';
import { startDeliveryRetention } from '../../actors/webhook/retention.ts';
import { startIdempotencyKeyPurge } from '../../actors/workspace/idempotency-retention.ts';
import { startSessionPurge } from '../../http/auth/session-retention.ts';

/**
 * The periodic purges of old rows. `ownedNow` (cluster mode) is the shards this node owns at the time: each
 * node prunes its own, so each row once in the cluster. Stopped, after the actors, in the reverse order.
 */
export function startHousekeeping(stack: CleanupStack, db: Database, clock: Clock, logger: Logger, ownedNow: (() => OwnedShards) | undefined): void {
  // Sessions past their expiry whose cookie never came back (every node; each row is deleted once).
  const sessionPurge = startSessionPurge(db, clock, logger);
  stack.defer(() => sessionPurge.stop());
  // Stored Idempotency-Keys past their 24 hours.
  const idempotencyPurge = startIdempotencyKeyPurge(db, clock, logger, ownedNow);
  stack.defer(() => idempotencyPurge.stop());
  // Webhook deliveries past those kept per endpoint, and deleted endpoints.
  const webhookRetention = startDeliveryRetention(db, clock, logger, ownedNow);
  stack.defer(() => webhookRetention.stop());
}
