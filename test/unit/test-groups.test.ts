import fs from 'node:fs';
import t from 'tap';
import { aloneFiles, filesOfGroup, groupCount, groupedFiles } from '../groups/run-group.ts';

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

t.test('a group is a contiguous slice of the sorted files', async (t) => {
  const files = Array.from({ length: 10 }, (_, i) => `test/x/${String(i).padStart(2, '0')}.test.ts`);
  t.same(
    [0, 1, 2].map((i) => filesOfGroup(i, 3, files)),
    [files.slice(0, 3), files.slice(3, 6), files.slice(6, 10)],
  );
  t.same(filesOfGroup(0, 1, files), files, 'one group holds all');
});
