import { trace } from '@opentelemetry/api';
import type { Test } from 'tap';
import { ActorDirectory, type ActorOwnership } from '../../runtime/actor-directory.ts';
import type { ProtocolMap } from '../../runtime/actor-protocol.ts';
import { systemClock, type Clock } from '../../runtime/clock.ts';
import { createLogger } from '../../runtime/logger.ts';
import { openDatabase, type Database } from '../../persistence/database.ts';
import { GroupCommitWriter } from '../../persistence/group-commit.ts';
import type { WriteFence } from '../../persistence/write-claims.ts';
import { migratedPglite } from './database.ts';

export interface ActorTestbed<K extends ProtocolMap, D = unknown> {
  db: Database;
  writer: GroupCommitWriter;
  actors: ActorDirectory<K, D>;
}

/**
 * An actor directory of its own on an in-memory PGlite (migrated), with its writer, for tests that register
 * the behaviors they exercise; stopped and closed when t ends. Cluster tests pass a fence and an ownership.
 * `K`: the kinds the test registers, with their protocols (the service's ActorKinds, or any by default); `D`:
 * what its actors get as ctx.deps.
 */
export async function actorTestbed<K extends ProtocolMap = ProtocolMap, D = unknown>(
  t: Test,
  options: { clock?: Clock; fence?: WriteFence; ownership?: ActorOwnership } = {},
): Promise<ActorTestbed<K, D>> {
  const db = await openDatabase({ databaseUrl: 'memory://', dataDir: '.data/test', pglite: await migratedPglite() });
  const tracer = trace.getTracer('test');
  const writer = new GroupCommitWriter(db, { windowMs: 5, maxBatch: 100, tracer, fence: options.fence });
  const actors = new ActorDirectory<K, D>({
    clock: options.clock ?? systemClock,
    logger: createLogger('silent'),
    db,
    writer,
    tracer,
    tracing: false,
    idleMs: 60_000,
    ownership: options.ownership,
  });
  t.teardown(async () => {
    await actors.stop();
    await writer.close();
    await db.close();
  });
  return { db, writer, actors };
}

/**
 * A handler table that takes every message type with one handler: for a test's probe kind that records
 * whatever it is sent.
 */
export function everyMessage<H>(handler: H): Record<string, H> {
  return new Proxy({}, { get: (_target, type) => (typeof type === 'string' ? handler : undefined) });
}
