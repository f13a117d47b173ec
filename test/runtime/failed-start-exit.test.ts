import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { startNode } from '../fixtures/child.ts';
import { failedStarts } from './failed-start-cases.ts';

// In a process of its own, which does not call process.exit: once the start failed, nothing it opened
// (connections, listeners, timers) may keep that process alive.

for (const failure of failedStarts) {
  t.test(`a start that fails because ${failure.name} leaves nothing holding the process: it ends by itself`, async (t) => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gs-failed-start-'));
    t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
    const database = process.env.TEST_DATABASE_URL ? await freshDatabaseUrl() : undefined;
    if (database) t.teardown(() => database.drop());
    const child = startNode(t, 'test/fixtures/start-fails.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      DATA_DIR: dataDir,
      DATABASE_URL: database?.url,
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
