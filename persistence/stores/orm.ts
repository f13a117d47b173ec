import type { SqlEntityManager } from '@mikro-orm/postgresql';
import type { Unit } from './unit.ts';

/** The entity manager behind a unit of work, for the store functions only (test/unit/stores-only.test.ts). */
export function emOf(unit: Unit): SqlEntityManager {
  return unit as SqlEntityManager;
}
