import type { SqlEntityManager } from '@mikro-orm/postgresql';

/**
 * The transaction a store function's statements run in: a group-commit unit's (persistence/group-commit.ts)
 * or a request's own. Callers above the stores pass it along and never use it themselves.
 */
export type Transaction = SqlEntityManager;
