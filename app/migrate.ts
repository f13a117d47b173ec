import path from 'node:path';
import { ConfigError, loadDatabaseSettings } from '../runtime/config.ts';
import { openDatabase, pendingMigrations } from '../persistence/database.ts';

/**
 * The service's migrate-only mode (docs/operations.md, Schema migrations): brings the configured database's
 * schema up to date, as a start does, then exits 0 without serving. It reads DATABASE_URL and DATA_DIR alone. `npm run migrate`, or
 * `node dist/app/migrate.js` from the production build; Kubernetes runs it as the pods' init container, so a
 * migration that fails shows as the pod's Init:Error, before any node of the new version serves. On
 * PostgreSQL under the migration lock: several running at once apply each migration once.
 */
async function main(): Promise<void> {
  let config: ReturnType<typeof loadDatabaseSettings>;
  try {
    config = loadDatabaseSettings();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(78);
  }
  if (config.databaseUrl === 'memory://') {
    process.stderr.write('migrate: DATABASE_URL=memory:// is a private in-process database; there is nothing to migrate\n');
    process.exit(64);
  }
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: 1, migrate: false });
  let pending: string[];
  try {
    pending = await pendingMigrations(db.orm);
  } finally {
    await db.close();
  }
  // Opened again to migrate: openDatabase applies what is missing under the lock, and tells a database already current by one read.
  const migrated = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMax: 1 });
  await migrated.close();
  const where = migrated.kind === 'postgres' ? 'PostgreSQL' : `PGlite in ${path.join(config.dataDir, 'pglite')}`;
  process.stdout.write(`${JSON.stringify({ database: migrated.kind, missing: pending })}\n`);
  process.stderr.write(
    pending.length === 0
      ? `migrate: ${where} was up to date\n`
      : `migrate: ${where}: lacked ${pending.length} migration(s), now applied: ${pending.join(', ')}\n`,
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`migrate: ${(error as Error).message}\n`);
  process.exit(1);
});
