import t from 'tap';
import { durableStorage } from '../helpers/database.ts';
import { startNode } from '../fixtures/child.ts';
import { failedStarts } from './failed-start-cases.ts';

// In a process of its own, which does not call process.exit: once the start failed, nothing it opened
// (connections, listeners, timers) may keep that process alive.

for (const failure of failedStarts) {
  t.test(`a start that fails because ${failure.name} leaves nothing holding the process: it ends by itself`, async (t) => {
    // Migrated already (a copy of a migrated PGlite directory, or a database from the migrated template): the
    // child's start goes straight to the step that fails.
    const { dataDir, postgres } = await durableStorage(t, 'gs-failed-start-');
    const child = startNode(t, 'test/fixtures/start-fails.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      DATA_DIR: dataDir,
      DATABASE_URL: postgres?.url,
      METRICS_HOST: '127.0.0.1',
      ...(process.env.TEST_REDIS_URL ? { REDIS_URL: process.env.TEST_REDIS_URL, REDIS_KEY_PREFIX: `test:failed-start:${process.pid}:` } : {}),
      ...(await failure.env(t)),
    });
    const [, message] = await child.line(/^start failed: (.*)$/, 120_000);
    t.match(message, failure.message);
    // The start failed; the fixture does not call process.exit. Any connection, listener or timer it left
    // open would keep the process alive past this bound (generous, for a loaded machine).
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      child.exited,
      new Promise<'still running'>((resolve) => {
        timer = setTimeout(() => resolve('still running'), 30_000);
      }),
    ]);
    clearTimeout(timer);
    t.same(outcome, { code: 0, signal: null }, 'the process ended by itself');
    t.equal(child.stderr().trim(), '', 'nothing on stderr');
  });
}
