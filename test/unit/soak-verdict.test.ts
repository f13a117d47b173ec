import t from 'tap';
import { judge } from '../../bench/scenarios/soak.ts';
import type { MemoryMinute } from '../../bench/lib/types.ts';

const MiB = 2 ** 20;
function minutes(rss: number[], heap: number[]): MemoryMinute[] {
  return rss.map((r, i) => ({
    minute: i + 1,
    phase: i < 2 ? 'warm-up' : 'measured',
    rssBytes: r * MiB,
    heapUsedBytes: heap[i]! * MiB,
    heapUsedBeforeGcBytes: heap[i]! * MiB,
    heapTotalBytes: 0,
    externalBytes: 0,
    arrayBuffersBytes: 0,
    created: 100,
    otherAnswers: {},
    cpuUsPerCreate: 1,
    latencyMs: { p50: 1, p99: 2 },
  }));
}

t.test('the soak verdict: a plateau with noisy RSS levels off; a steady leak of heap or RSS does not', async (t) => {
  const plateau = judge(minutes([600, 610, 671, 622, 582, 616, 679, 692, 679, 607, 618, 595], Array(12).fill(68)), 2);
  t.ok(plateau.levelledOff, plateau.verdict);
  t.ok(plateau.rssGrowthRatio < 1.05);

  const heapLeak = judge(
    minutes(
      Array(12).fill(600),
      Array.from({ length: 12 }, (_, i) => 65 + 7 * i),
    ),
    2,
  );
  t.notOk(heapLeak.levelledOff, 'the heap after a collection grows 7 MiB a minute');
  t.match(heapLeak.verdict, /did NOT level off/);

  const rssLeak = judge(
    minutes(
      Array.from({ length: 12 }, (_, i) => 300 + 20 * i),
      Array(12).fill(60),
    ),
    2,
  );
  t.notOk(rssLeak.levelledOff, 'RSS grows 20 MiB a minute outside the JS heap');
  t.ok(rssLeak.rssGrowthRatio > 1.05);
});
