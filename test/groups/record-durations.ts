import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Writes test/groups/durations.json, the seconds each test file took, from the output of a run of the groups
 * (`CI=true SKIP_PRODUCTION_INSTALL=1 npx tap > run.log`, on a quiet machine), read on stdin:
 *
 *   node --import ./test/loader/register.mjs test/groups/record-durations.ts < run.log
 *
 * and test/groups/durations-postgres.json from the PostgreSQL and Redis half's output (.ci/run's second run)
 * with `postgres` as its argument.
 *
 * A file's line is its subtest's within its group: `    ok 3 - test/money/billing.test.ts # time=1234.5ms`.
 * The groups are balanced by these figures (run-group.ts, filesOfGroup); a file missing from them counts
 * as the median, so a new file needs no new recording, only a large change of the suite's times does.
 */
const FILE_LINE = /^ {4}(?:not )?ok \d+ - (test\/\S+\.test\.ts) # time=([\d.]+)ms$/;

export function secondsOf(log: string): Record<string, number> {
  const seconds: Record<string, number> = {};
  for (const line of log.split('\n')) {
    const match = FILE_LINE.exec(line);
    if (match) seconds[match[1]!] = Math.round(Number(match[2]) / 100) / 10;
  }
  return Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => (a < b ? -1 : 1)));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // `postgres` as the argument: the figures of the PostgreSQL and Redis half (test/groups/durations-postgres.json).
  const name = process.argv[2] === 'postgres' ? 'durations-postgres.json' : 'durations.json';
  const seconds = secondsOf(fs.readFileSync(0, 'utf8'));
  if (Object.keys(seconds).length === 0) throw new Error('no test file lines in the input: give it the output of `npx tap`');
  fs.writeFileSync(new URL(`./${name}`, import.meta.url), `${JSON.stringify(seconds, null, 2)}\n`);
  console.log(`${Object.keys(seconds).length} files' seconds written to test/groups/${name}`);
}
