import t from 'tap';
import { COST_SCALE, costOf, FairQueue } from '../../actors/generation/fair-queue.ts';
import { ProviderCapacity } from '../../actors/generation/provider-capacity.ts';
import { ManualClock } from '../../runtime/clock.ts';

const JOB_MS = 200;

interface Workspace {
  id: string;
  weight: number;
  queue: string[];
}

/**
 * One provider's slots shared as the workspace actors share them: each workspace asks with its oldest
 * job, a job holds its slot for JOB_MS, a freed slot's grant reaches its workspace as a message (a timer
 * of 0 ms on the manual clock, after whatever else is due then), and the workspace then starts the job
 * and asks again with its next one.
 */
function provider(limit: number) {
  const clock = new ManualClock(0);
  const queue = new FairQueue();
  const workspaces = new Map<string, Workspace>();
  const started: Array<{ job: string; at: number }> = [];
  let inFlight = 0;
  let mostInFlight = 0;

  const schedule = (ws: Workspace) => {
    while (ws.queue.length > 0) {
      const { holds, grants } = queue.ask(ws.id, ws.queue[0]!, ws.weight, limit);
      deliver(grants);
      if (!holds) return;
      const job = ws.queue.shift()!;
      started.push({ job, at: clock.now() });
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      clock.setTimer(() => {
        inFlight--;
        deliver(queue.release(job, limit));
      }, JOB_MS);
    }
  };
  const deliver = (grants: Array<{ workspaceId: string }>) => {
    for (const grant of grants) clock.setTimer(() => schedule(workspaces.get(grant.workspaceId)!), 0);
  };

  return {
    clock,
    queue,
    started,
    mostInFlight: () => mostInFlight,
    /** `jobs` new jobs of the workspace, named `<id><n>` from its first, queued now. */
    submit(id: string, jobs: number, weight = 1) {
      let ws = workspaces.get(id);
      if (!ws) workspaces.set(id, (ws = { id, weight, queue: [] }));
      const first = started.filter((s) => s.job.startsWith(id)).length + ws.queue.length + 1;
      for (let n = first; n < first + jobs; n++) ws.queue.push(`${id}${n}`);
      schedule(ws);
    },
    order: () => started.map((s) => s.job),
  };
}

t.test("a workspace's single job is granted the next slot while another has 20 queued", async (t) => {
  const p = provider(1);
  p.submit('a', 20);
  p.clock.advance(50);
  p.submit('b', 1);
  p.clock.advance(30 * JOB_MS);
  t.same(p.order(), ['a1', 'b1', ...Array.from({ length: 19 }, (_, i) => `a${i + 2}`)], "b's job goes right after the job in flight");
  const b1 = p.started.find((s) => s.job === 'b1')!;
  t.equal(b1.at, JOB_MS, 'it started when the first slot freed, 150 ms after it came');
  t.ok((b1.at - 50) / JOB_MS <= 2, 'within two job-times');
  t.equal(p.mostInFlight(), 1, 'never more than the limit');
});

t.test('two backlogged workspaces alternate; each keeps its own order', async (t) => {
  const p = provider(1);
  p.submit('a', 4);
  p.submit('b', 4);
  p.clock.advance(20 * JOB_MS);
  t.same(p.order(), ['a1', 'b1', 'a2', 'b2', 'a3', 'b3', 'a4', 'b4']);
});

t.test('weights 3:1, both always backlogged: 3 grants to 1 over 1,000 grants, in a steady pattern', async (t) => {
  const p = provider(1);
  p.submit('a', 800, 3);
  p.submit('b', 800, 1);
  p.clock.advance(1_000 * JOB_MS - 1);
  const grants = p.order();
  t.equal(grants.length, 1_000);
  const a = grants.filter((g) => g.startsWith('a')).length;
  const b = grants.length - a;
  t.equal(a, 750, 'a: three in four');
  t.equal(b, 250, 'b: one in four');
  t.ok(Math.abs(a / b - 3) / 3 <= 0.1, `within 10% of 3:1 (${a}:${b})`);
  // a's finish tags go by thirds of b's: a's first three slots end before b's first one would.
  t.same(
    grants
      .slice(0, 12)
      .map((g) => g[0])
      .join(''),
    'aaabaaabaaab',
    'the first grants',
  );
  // Never more than 4 grants apart for b: no long run of a's.
  const bAt = grants.flatMap((g, i) => (g.startsWith('b') ? [i] : []));
  t.ok(
    bAt.every((at, i) => i === 0 || at - bAt[i - 1]! <= 4),
    'b gets one slot in every four',
  );
});

t.test('a workspace that joins late is not owed the past: no burst', async (t) => {
  const p = provider(1);
  p.submit('a', 200);
  p.clock.advance(100 * JOB_MS + 10);
  p.submit('c', 50);
  p.clock.advance(20 * JOB_MS);
  const after = p.order().slice(101, 121);
  t.same(after.slice(0, 6), ['c1', 'a102', 'c2', 'a103', 'c3', 'a104'], 'c takes every other slot, not the next hundred');
  t.equal(after.filter((g) => g.startsWith('c')).length, 10, 'half of the next 20 grants');
});

t.test('nothing starves: a weight-1 workspace among weight-1000 ones still gets its share', async (t) => {
  const p = provider(2);
  p.submit('heavy1', 3_000, 1_000);
  p.submit('heavy2', 3_000, 1_000);
  p.submit('light', 5, 1);
  p.clock.advance(2_400 * JOB_MS);
  const grants = p.order();
  const light = grants.flatMap((g, i) => (g.startsWith('light') ? [i] : []));
  t.same(light, [2_001, 4_002], 'a share of 1 in 2,001: its first job after 2,001 grants (the time its share takes), and every 2,001 after');
  t.equal(p.mostInFlight(), 2);
});

t.test('a job that ends while waiting withdraws its ask; the next job of its workspace asks in its place', async (t) => {
  const queue = new FairQueue();
  t.same(queue.ask('a', 'a1', 1, 1), { holds: true, grants: [] });
  t.same(queue.ask('b', 'b1', 1, 1), { holds: false, grants: [] });
  t.same(queue.ask('b', 'b2', 1, 1), { holds: false, grants: [] }, 'one ask per workspace at a time');
  t.same(queue.ask('c', 'c1', 1, 1), { holds: false, grants: [] });
  t.equal(queue.askOf('b'), 'b1');
  t.same(queue.release('b1', 1), [], 'b1 cancelled: the slot is still held, nothing granted');
  t.equal(queue.askOf('b'), undefined);
  t.same(queue.ask('b', 'b2', 1, 1), { holds: false, grants: [] });
  t.same(
    queue.snapshot().asks,
    [
      ['b', 'b2', 0, 1_000_000],
      ['c', 'c1', 0, 1_000_000],
    ],
    'b2 asks from V, as b1 did: its place is not lost',
  );
  t.same(queue.release('a1', 1), [{ workspaceId: 'b', generationId: 'b2' }], 'equal finish tags: the smaller workspace id first, as Redis orders them');
  t.same(queue.ask('b', 'b2', 1, 1), { holds: true, grants: [] }, 'the granted job takes its slot');
  t.same(queue.ask('b', 'b3', 1, 1).holds, false);
  t.same(queue.release('b2', 1), [{ workspaceId: 'c', generationId: 'c1' }], 'then c, before b3');
  t.equal(queue.holding, 1);
  t.equal(queue.askOf('b'), 'b3');
});

t.test('a slot is taken at once only when one is free and nobody waits', async (t) => {
  const queue = new FairQueue();
  t.ok(queue.takeIfFree('a', 'a1', 1, 2), 'a free slot, nobody waiting');
  t.ok(queue.takeIfFree('a', 'a2', 1, 2));
  t.notOk(queue.takeIfFree('b', 'b1', 1, 2), 'full');
  t.equal(queue.waiting, 0, 'takeIfFree never queues an ask');
  t.notOk(queue.ask('b', 'b1', 1, 2).holds);
  t.same(queue.release('a1', 2), [{ workspaceId: 'b', generationId: 'b1' }], 'the freed slot is granted to b, not left free');
  t.notOk(queue.takeIfFree('c', 'c1', 1, 2), 'no free slot: the one freed is b1');
  queue.release('b1', 2);
  t.ok(queue.takeIfFree('c', 'c1', 1, 2));
});

t.test('a raised limit grants the waiting at the next ask; a recovered job counts against the limit', async (t) => {
  const queue = new FairQueue();
  queue.hold('r1');
  t.notOk(queue.ask('a', 'a1', 1, 1).holds, 'the recovered job holds the one slot');
  t.same(queue.ask('b', 'b1', 1, 2).grants, [{ workspaceId: 'a', generationId: 'a1' }], 'two slots now: a gets the second');
  t.notOk(queue.ask('b', 'b1', 1, 2).holds);
  t.same(queue.release('r1', 2), [{ workspaceId: 'b', generationId: 'b1' }]);
});

t.test('virtual time: tags from the weights, and back to 0 whenever nobody waits', async (t) => {
  t.equal(costOf(1), COST_SCALE);
  t.equal(costOf(3), 333_333);
  t.equal(costOf(1_000), 1_000);
  const queue = new FairQueue();
  queue.ask('a', 'a1', 1, 1);
  queue.ask('a', 'a2', 1, 1);
  queue.ask('b', 'b1', 4, 1);
  t.same(
    queue.snapshot().asks,
    [
      ['b', 'b1', 0, 250_000],
      ['a', 'a2', 1_000_000, 2_000_000],
    ],
    'b, fresh, starts at V; a after its slot',
  );
  queue.release('a1', 1);
  queue.ask('b', 'b1', 4, 1);
  queue.ask('b', 'b2', 4, 1);
  t.same(queue.snapshot().asks, [
    ['b', 'b2', 250_000, 500_000],
    ['a', 'a2', 1_000_000, 2_000_000],
  ]);
  queue.release('b1', 1);
  queue.ask('b', 'b2', 4, 1);
  queue.release('b2', 1);
  t.same(queue.snapshot(), { virtualTime: 0, tags: { a: 1_000_000 }, asks: [], holders: ['a2'] }, 'nobody waits: rebased, b forgotten');
});

t.test('ProviderCapacity wakes only the workspace a freed slot is granted to', async (t) => {
  const woken: string[] = [];
  const capacity = new ProviderCapacity(
    (p) => (p === 'p' ? 1 : undefined),
    (ws) => woken.push(ws),
  );
  t.ok(capacity.tryAcquire('p', 'a1', 'a'));
  t.notOk(capacity.tryAcquire('p', 'a2', 'a'));
  t.notOk(capacity.tryAcquire('p', 'b1', 'b', 3));
  t.notOk(capacity.tryAcquire('p', 'c1', 'c'));
  t.notOk(capacity.acquireIfFree('p', 'd1', 'd'), 'others wait: a new job does not jump them');
  capacity.release('a1');
  t.same(woken, ['b'], 'one workspace woken: b, whose weight 3 puts it first');
  t.notOk(capacity.tryAcquire('p', 'c1', 'c'), 'c was not granted the slot');
  t.ok(capacity.tryAcquire('p', 'b1', 'b'), 'b takes it');
  t.equal(capacity.inFlight('p'), 1);
  t.ok(capacity.tryAcquire('q', 'x', 'a'), 'a provider without a limit: always');
  t.equal(capacity.inFlight('q'), 1);
  capacity.release('b1');
  t.same(woken, ['b', 'c'], 'then c: a asked first, but its ask starts after the slot it had');
});
