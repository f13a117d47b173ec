import type { Tracer } from '@opentelemetry/api';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';
import type { HealthState } from './health.ts';
import type { ActorDirectory } from './actor-directory.ts';
import type { Database } from '../persistence/database.ts';
import type { SnapshotWriter } from '../persistence/snapshot-writer.ts';

export type Engine = 'uws-native' | 'uws-fallback';

/** The one bag of resources built at start-up from configuration; nothing below reads the environment. */
export interface Services {
  config: Config;
  version: string;
  engine: Engine;
  clock: Clock;
  logger: Logger;
  tracer: Tracer;
  db: Database;
  writer: SnapshotWriter;
  actors: ActorDirectory;
  health: HealthState;
}
