/**
 * The migrations in the order they apply, by the name each is recorded under in `mikro_orm_migrations`. Kept
 * apart from their classes so that a start-up on a database already up to date can tell so without loading
 * them, or the migrator (`persistence/database.ts`). A migration, once landed, is never edited, only followed.
 */
export const MIGRATION_NAMES = [
  '0001-foundation',
  '0002-identity',
  '0005-generations',
  '0006-assets',
  '0007-webhooks',
  '0008-money',
  '0009-reservations',
  '0010-attempts',
  '0011-cluster',
  '0012-usage-rollups',
  '0013-unfinished-indexes',
  '0014-key-limits',
  '0015-webhook-operations',
  '0016-webhook-signing',
  '0017-trace-context',
  '0018-session-expiry',
  '0019-write-checks',
  '0020-catalog-pricing',
  '0021-provider-job-index',
  '0022-usage-series',
  '0023-budget-alerts',
  '0024-generation-charge',
] as const;

export type MigrationName = (typeof MIGRATION_NAMES)[number];
