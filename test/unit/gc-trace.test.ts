import { execFileSync } from 'node:child_process';
import t from 'tap';
import { AllocationTally } from '../../bench/lib/gc-trace.ts';

// The peers bench reads the service's allocation per job from its --trace-gc lines (BENCH_TRACE_GC).
t.test("a process's allocation, read from the --trace-gc lines this node prints", async (t) => {
  // About 400 MB of short-lived arrays of 128 small integers (1 KB each), of which it keeps the last 16.
  const output = execFileSync(
    process.execPath,
    ['--trace-gc', '-e', 'const ring = new Array(16); for (let i = 0; i < 400_000; i++) ring[i & 15] = new Array(128).fill(i); console.log(ring.length);'],
    { encoding: 'utf8' },
  );
  const tally = new AllocationTally();
  const lines = output.split('\n');
  const counted = lines.filter((line) => tally.add(line)).length;
  t.ok(counted > 3, `its collections are recognised (${counted} of ${lines.length} lines)`);
  const mb = tally.bytes! / (1024 * 1024);
  t.ok(mb > 300 && mb < 1_200, `about the 400 MB it allocated: ${mb.toFixed(0)} MB`);
  t.notOk(tally.add('{"level":30,"msg":"a log line"}'), 'a log line is not a collection');
});

t.test('between two collections, what the heap grew by', async (t) => {
  const tally = new AllocationTally();
  t.equal(tally.bytes, undefined, 'nothing before the first collection');
  tally.add('[1:0x1]       10 ms: Scavenge 4.0 (5.0) -> 2.0 (6.0) MB, 0.5 / 0.0 ms  (average mu = 1.000, current mu = 1.000) allocation failure;');
  tally.add('[1:0x1]       20 ms: Scavenge 10.0 (12.0) -> 3.0 (12.0) MB, 0.4 / 0.0 ms  (average mu = 1.000, current mu = 1.000) allocation failure;');
  tally.add(
    '[1:0x1]       30 ms: Mark-Compact 9.0 (12.0) -> 8.5 (14.0) MB, 3.1 / 0.0 ms  (average mu = 0.9, current mu = 0.9) finalize incremental marking via task; GC in old space requested',
  );
  t.equal(tally.bytes, (4 + (10 - 2) + (9 - 3)) * 1024 * 1024, 'the first start, then each start less the end before it');
});
