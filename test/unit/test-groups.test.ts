import fs from 'node:fs';
import t from 'tap';
import { aloneFiles, balancedGroups, durationsFile, filesOfGroup, groupCount, groupedFiles, measuredSeconds } from '../groups/run-group.ts';
import { secondsOf } from '../groups/record-durations.ts';

// The groups (test/groups/) decide which test files `npm test` and CI run: a file in no group never runs.
t.test('every test file runs once: in exactly one group, or alone', async (t) => {
  const grouped = groupedFiles();
  const count = groupCount();
  t.ok(count > 1, 'several groups, so that tap runs them side by side');
  const seen = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const files = filesOfGroup(i, count);
    t.ok(files.length > 0, `group ${i + 1} has files`);
    for (const file of files) seen.set(file, (seen.get(file) ?? 0) + 1);
  }
  t.same([...seen.keys()].sort(), grouped, 'the groups together hold every grouped file');
  t.same(
    [...seen].filter(([, n]) => n !== 1),
    [],
    'none twice',
  );
  t.ok(grouped.includes('test/unit/test-groups.test.ts'), 'this file among them');
  for (const file of aloneFiles()) {
    t.ok(fs.existsSync(file), `${file}, run alone, exists`);
    t.notOk(grouped.includes(file), `${file} is in no group`);
  }
});

t.test('groups are balanced by measured seconds: longest first, each to the group with least time so far', async (t) => {
  const seconds: Record<string, number> = { 'test/a.test.ts': 9, 'test/b.test.ts': 7, 'test/c.test.ts': 5, 'test/d.test.ts': 4, 'test/e.test.ts': 2 };
  const files = Object.keys(seconds);
  // 9 | 7 | 5, then 4 to the 5 (9), then 2 to the 7 (9): within the longest file of one another.
  t.same(balancedGroups(files, 3, seconds), [['test/a.test.ts'], ['test/b.test.ts', 'test/e.test.ts'], ['test/c.test.ts', 'test/d.test.ts']]);
  t.same(
    [0, 1, 2].map((i) => filesOfGroup(i, 3, files, seconds)),
    balancedGroups(files, 3, seconds),
    'filesOfGroup is one of them',
  );
  t.same(balancedGroups(files, 1, seconds), [[...files].sort()], 'one group holds all, sorted');
  t.same(balancedGroups(files, 3, seconds), balancedGroups([...files].reverse(), 3, seconds), 'the order the files come in changes nothing');
});

t.test('a file not measured yet counts as the median of those that were', async (t) => {
  const seconds: Record<string, number> = { 'test/a.test.ts': 10, 'test/b.test.ts': 3, 'test/c.test.ts': 1 };
  // The new file counts 3: after 10 and 3 fill two groups, the new one and 1 go to the group of 3 (3, then 6 against 10).
  t.same(balancedGroups([...Object.keys(seconds), 'test/new.test.ts'], 2, seconds), [
    ['test/a.test.ts'],
    ['test/b.test.ts', 'test/c.test.ts', 'test/new.test.ts'],
  ]);
  t.same(balancedGroups(['test/x.test.ts', 'test/y.test.ts'], 2, {}), [['test/x.test.ts'], ['test/y.test.ts']], 'no figures at all: a file each');
});

t.test("the recorded seconds are read from a run's tap output: each file's subtest line", async (t) => {
  const log = [
    'ok 1 - test/groups/group-01.ts # time=9000ms',
    '    ok 1 - test/money/billing.test.ts # time=1234.56ms',
    '    not ok 2 - test/money/wallet.test.ts # time=80ms',
    '        ok 1 - test/not/a-file-line.test.ts # time=5ms',
  ].join('\n');
  t.same(secondsOf(log), { 'test/money/billing.test.ts': 1.2, 'test/money/wallet.test.ts': 0.1 });
});

t.test('durations.json and durations-postgres.json name only files that exist', async (t) => {
  const grouped = new Set(groupedFiles());
  for (const backend of ['pglite', 'postgres'] as const) {
    const measured = Object.keys(measuredSeconds(backend));
    t.ok(measured.length > 100, `${backend}: figures recorded`);
    t.same(
      measured.filter((file) => !grouped.has(file)),
      [],
      `${backend}: a removed or renamed file is removed from it too (record-durations.ts)`,
    );
  }
  t.match(durationsFile('postgres'), /durations-postgres\.json$/);
  t.match(durationsFile('pglite'), /durations\.json$/);
});
