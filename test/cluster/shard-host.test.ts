import t from 'tap';
import { createLogger } from '../../runtime/logger.ts';
import { ShardHost } from '../../runtime/cluster/shard-host.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { advanceUntil } from '../helpers/eventually.ts';

const host = (shardCount: number) =>
  new ShardHost({
    shardCount,
    logger: createLogger('silent'),
    recoverShard: () => [],
    retire: async () => 0,
    flushWrites: async () => {},
    drainMs: 0,
    retryMs: 1_000,
  });

t.test("a workspace's shard is remembered, and always the one SHA-256 gives, also once the memo forgets", async (t) => {
  for (const count of [1, 64, 4096]) {
    const h = host(count);
    // More workspaces than the memo holds, asked in turn, then again in the reverse order and at random.
    const ids = Array.from({ length: 40_000 }, (_, i) => `ws_${i.toString(36)}`);
    const order = [...ids, ...[...ids].reverse(), ...Array.from({ length: 20_000 }, () => ids[Math.floor(Math.random() * ids.length)]!)];
    const wrong = order.filter((id) => h.shardOf(id) !== shardOf(id, count));
    t.same(wrong, [], `${count} shards: ${order.length} lookups agree`);
  }
});

t.test('drain: a job that went in flight while the mailboxes emptied is waited for too, and its outcome flushed', async (t) => {
  let inFlight = 0;
  const steps: string[] = [];
  const clock = new ManualClock();
  const h = new ShardHost({
    shardCount: 4,
    logger: createLogger('silent'),
    clock,
    recoverShard: () => [],
    drainMs: 60_000,
    retryMs: 1_000,
    jobsInFlight: async () => inFlight,
    retire: async () => {
      steps.push('retire');
      if (steps.filter((step) => step === 'retire').length === 1) {
        // A start decided before the drain began commits now and hands the job to its provider, which ends it a little later.
        inFlight = 1;
        clock.setTimer(() => {
          inFlight = 0;
          steps.push('job ended');
        }, 100);
      }
      return 1;
    },
    flushWrites: async () => {
      steps.push('flush');
    },
  });
  await advanceUntil(clock, h.drain({ shard: 1, epoch: 1 }));
  t.same(
    steps,
    ['flush', 'retire', 'flush', 'job ended', 'retire', 'flush'],
    'the handover commits what is queued, waits for the job, then retires and flushes again',
  );
});

t.test('drain: a job that never ends holds the handover back no longer than the drain allows', async (t) => {
  const warnings: string[] = [];
  const logger = createLogger('silent');
  logger.warn = ((_: unknown, message: string) => {
    warnings.push(message);
  }) as typeof logger.warn;
  const clock = new ManualClock();
  const h = new ShardHost({
    shardCount: 4,
    logger,
    clock,
    recoverShard: () => [],
    drainMs: 200,
    retryMs: 1_000,
    jobsInFlight: async () => 1,
    retire: async () => 0,
    flushWrites: async () => {},
  });
  const started = clock.now();
  await advanceUntil(clock, h.drain({ shard: 1, epoch: 1 }));
  t.ok(clock.now() - started >= 200 && clock.now() - started < 300, 'given up at the deadline, not before');
  t.same(warnings, ['jobs still in flight at the drain deadline: the next owner resubmits them']);
});

// The drain before a handover: the jobs in flight are counted from the database, so a job whose actor took
// its slot just before the drain began (its `reserved` write still queued) must be committed and counted,
// or the next owner would find it reserved and hand it to its provider a second time.
t.test('a job whose reserved write is still queued when the drain begins is waited for', async (t) => {
  const queued = new Set<string>(['gen_a']);
  const committed = new Set<string>();
  const ended: string[] = [];
  const clock = new ManualClock();
  const host = new ShardHost({
    shardCount: 4,
    logger: createLogger('silent'),
    clock,
    drainMs: 10_000,
    retryMs: 100,
    recoverShard: () => [],
    retire: async () => 0,
    flushWrites: async () => {
      for (const id of queued) committed.add(id);
      queued.clear();
    },
    jobsInFlight: async () => committed.size,
  });
  // The job ends a little after the drain began; its terminal write leaves the in-flight rows.
  clock.setTimer(() => {
    committed.delete('gen_a');
    ended.push('gen_a');
  }, 200);
  await advanceUntil(clock, host.drain({ shard: 1, epoch: 1 }));
  t.same(ended, ['gen_a'], 'the drain ended only after the job did');
});
