import t from 'tap';
import { startNode } from '../fixtures/child.ts';
import { durableStorage, freshDatabaseUrl } from '../helpers/database.ts';
import { MIGRATION_NAMES } from '../../persistence/migrations/names.ts';

/**
 * The migrate-only mode and MIGRATE_AT_START=false (docs/operations.md, Schema migrations), as Kubernetes'
 * init container and node run them: on a new database a node told not to migrate refuses to start, naming the
 * step to run; `app/migrate.ts` applies every migration and exits 0, a second run finds none missing; then the
 * node starts. On PostgreSQL with TEST_DATABASE_URL (an empty database of its own), PGlite on disk otherwise.
 */
t.test('a node that does not migrate waits for the migrate step', async (t) => {
  const { dataDir } = await durableStorage(t, 'gs-migrate-', { empty: true });
  const postgres = process.env.TEST_DATABASE_URL ? await freshDatabaseUrl({ empty: true }) : undefined;
  t.teardown(() => postgres?.drop());
  const env = { DATA_DIR: dataDir, ...(postgres ? { DATABASE_URL: postgres.url } : {}), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn' };

  const refused = startNode(t, 'app/main.ts', { ...env, MIGRATE_AT_START: 'false' });
  const ended = await refused.exited;
  t.not(ended.code, 0, 'MIGRATE_AT_START=false on a new database: the start fails');
  t.match(
    refused.stderr(),
    new RegExp(`lacks ${MIGRATION_NAMES.length} migration\\(s\\).*MIGRATE_AT_START is false: run the migrate step`),
    'naming what is missing and the step',
  );

  const first = startNode(t, 'app/migrate.ts', env);
  t.equal((await first.exited).code, 0, first.stderr());
  t.same(JSON.parse(first.lines[0]!), { database: postgres ? 'postgres' : 'pglite', missing: [...MIGRATION_NAMES] }, 'the migrate step applies them all');
  const second = startNode(t, 'app/migrate.ts', env);
  t.equal((await second.exited).code, 0, second.stderr());
  t.same(JSON.parse(second.lines[0]!).missing, [], 'run again: nothing missing');
  t.match(second.stderr(), /was up to date/);

  const node = startNode(t, 'app/main.ts', { ...env, MIGRATE_AT_START: 'false' });
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (/listening on http/.test(node.stderr())) {
        clearInterval(timer);
        resolve();
      }
    }, 50);
    void node.exited.then(() => {
      clearInterval(timer);
      reject(new Error(`the node exited:\n${node.stderr()}`));
    });
  });
  t.pass('after it, the node starts without migrating');
  node.proc.kill('SIGTERM');
  t.equal((await node.exited).code, 0, 'and stops cleanly');
});
