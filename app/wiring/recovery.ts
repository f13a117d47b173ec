import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { HealthState } from '../../runtime/health.ts';
import type { ServiceActorDirectory } from '../../actors/kinds.ts';
import { runRecovery, type RecoveryTask } from '../../runtime/recovery.ts';
import type { Database } from '../../persistence/database.ts';
import { generationRecovery } from '../../actors/generation-recovery.ts';
import { webhookRecovery } from '../../actors/webhook/restart-recovery.ts';
import type { RenewalScheduler } from '../../actors/billing/renewals.ts';
import type { ClusterMembership } from './cluster.ts';

/**
 * Runs start-up recovery, once listening so that probes see 503 until it is done: the unfinished jobs, the
 * pending deliveries and the renewals, or in cluster mode the node's join (each shard it gains recovers
 * its own work). Settles when it has run, whether it succeeded or failed (health tells which).
 */
export function startRecovery(
  input: { db: Database; actors: ServiceActorDirectory; renewals: RenewalScheduler; clock: Clock; logger: Logger; health: HealthState },
  membership: ClusterMembership | undefined,
  extra: RecoveryTask[],
): Promise<void> {
  const { db, actors, renewals, clock, logger, health } = input;
  const tasks: RecoveryTask[] = membership
    ? [
        {
          name: 'cluster shards',
          run: async () => {
            await membership.node.start();
            await membership.shardHost.recovered();
            return membership.node.ownedShards().length;
          },
        },
      ]
    : [generationRecovery(db, actors, clock), webhookRecovery(db, actors), { name: 'subscription renewals', run: () => renewals.start() }];
  return runRecovery([...tasks, ...extra], logger).then(
    () => {
      health.recovered = true;
    },
    (error: unknown) => {
      health.recoveryError = (error as Error).message;
      logger.error({ err: error }, 'recovery failed; the service stays not ready');
    },
  );
}
