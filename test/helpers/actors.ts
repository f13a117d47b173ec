import { trace } from '@opentelemetry/api';
import type { Test } from 'tap';
import { ActorDirectory, type ActorOwnership } from '../../runtime/actor-directory.ts';
import { systemClock, type Clock } from '../../runtime/clock.ts';
import { createLogger } from '../../runtime/logger.ts';
import { openDatabase, type Database } from '../../persistence/database.ts';
import { GroupCommitWriter } from '../../persistence/group-commit.ts';
import type { WriteFence } from '../../persistence/write-claims.ts';
import { migratedPglite } from './database.ts';

export interface ActorTestbed {
  db: Database;
  writer: GroupCommitWriter;
  actors: ActorDirectory;
}

/**
 * An actor directory of its own on an in-memory PGlite (migrated), with its writer, for tests that register
 * the behaviors they exercise; stopped and closed when t ends. Cluster tests pass a fence and an ownership.
 */
export async function actorTestbed(t: Test, options: { clock?: Clock; fence?: WriteFence; ownership?: ActorOwnership } = {}): Promise<ActorTestbed> {
  const db = await openDatabase({ databaseUrl: 'memory://', dataDir: '.data/test', pglite: await migratedPglite() });
  const tracer = trace.getTracer('test');
  const writer = new GroupCommitWriter(db, { windowMs: 5, maxBatch: 100, tracer, fence: options.fence });
  const actors = new ActorDirectory({
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
