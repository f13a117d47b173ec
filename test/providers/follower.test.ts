// The job follower (providers/follower.ts) on a manual clock, with a scripted protocol module: the backstop
// poll at pollMs, events, the deadline, cancels, the submission window, streams, requests whose answer is the
// outcome, and one outcome per job.
// Nothing sleeps: time moves when the test advances the clock.
import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { type AdapterContext, type AdapterJob, PROVIDER_ERROR_CODES, ProviderFailure } from '../../providers/adapter.ts';
import { type AnswerCall, JobFollower, type Look, type ProtocolModule, type Submitted, type TerminalUpdate } from '../../providers/follower.ts';
import { recorder } from '../helpers/updates.ts';

const POLL_MS = 1_000;

/** Lets promises already resolved run their continuations (no time passes). */
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

interface Notes {
  n: number;
}

/** A module whose answers the test scripts; it counts every call. */
function scripted(options: Partial<ProtocolModule<Notes>> & { looks?: Look[]; submitted?: Partial<Submitted<Notes>> } = {}) {
  const calls = { submit: 0, get: 0, cancel: [] as Array<{ id: string; notes: Notes | undefined }> };
  const looks = options.looks ?? [];
  const module: ProtocolModule<Notes> = {
    kind: 'scripted',
    async submit() {
      calls.submit += 1;
      return { providerJobId: `p-${calls.submit}`, notes: { n: calls.submit }, ...options.submitted };
    },
    resume: (providerJobId) =>
      providerJobId.startsWith('p-') ? { notes: { n: 0 } } : { failure: new ProviderFailure(PROVIDER_ERROR_CODES.error, 'not ours') },
    async get() {
      calls.get += 1;
      return looks.shift() ?? { type: 'pending' };
    },
    async cancel(id, notes) {
      calls.cancel.push({ id, notes });
    },
    parseEvent: (_f, payload) => payload as Look,
    overdue: () => ({ type: 'failed', errorCode: PROVIDER_ERROR_CODES.timeout, errorMessage: 'overdue' }),
    ...options,
  };
  return { module, calls };
}

function setUp(module: ProtocolModule<Notes>) {
  const clock = new ManualClock();
  const context: AdapterContext = {
    fetchOutput: async () => Buffer.alloc(0),
    maxResponseBytes: 1 << 20,
    maxOutputBytes: 1 << 20,
    pollIntervalMs: POLL_MS,
    requestTimeoutMs: 500,
    now: () => clock.now(),
    clock,
  };
  const follower = new JobFollower(module, context);
  const job = (extra: Partial<AdapterJob> = {}): AdapterJob => ({
    generationId: 'gen-1',
    mode: 'text_to_image',
    modelId: 'm',
    params: {},
    input: {},
    inputs: { images: [], videos: [] },
    deadline: clock.now() + 60_000,
    ...extra,
  });
  return { clock, follower, job };
}

const succeeded: Look = { type: 'over', update: { type: 'succeeded', files: [] } };

t.test('polls each job at pollMs on the clock, as the backstop, and tells running once and progress in order', async (t) => {
  const { module, calls } = scripted({
    looks: [
      { type: 'pending', progress: ['queued at 2'] },
      { type: 'pending', running: true, progress: ['a log line'] },
      { type: 'pending', running: true },
      succeeded,
    ],
  });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  t.same(await follower.submit(job(), r.report), { providerJobId: 'p-1' });
  await settle();
  t.equal(calls.get, 0, 'no look before a poll interval passed');
  clock.advance(POLL_MS - 1);
  await settle();
  t.equal(calls.get, 0);
  for (let i = 1; i <= 4; i++) {
    clock.advance(i === 1 ? 1 : POLL_MS);
    await settle();
    t.equal(calls.get, i, `look ${i} at ${i} poll intervals`);
  }
  t.same(r.updates, [
    { type: 'progress', detail: 'queued at 2' },
    { type: 'running' },
    { type: 'progress', detail: 'a log line' },
    { type: 'succeeded', files: [] },
  ]);
  t.equal(follower.size, 0, 'no longer followed');
  t.equal(clock.pendingTimers(), 0, 'no timer left behind');
});

t.test('an event ends the job at once; the poll stops, and events after the end change nothing', async (t) => {
  const { module, calls } = scripted();
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job(), r.report);
  follower.deliverEvent(providerJobId, { type: 'pending', running: true });
  follower.deliverEvent(providerJobId, succeeded);
  await settle();
  follower.deliverEvent(providerJobId, { type: 'over', update: { type: 'failed', errorCode: 'provider_error', errorMessage: 'late' } });
  clock.advance(10 * POLL_MS);
  await settle();
  t.equal(calls.get, 0, 'never polled');
  t.same(r.updates, [{ type: 'running' }, { type: 'succeeded', files: [] }]);
  t.equal(clock.pendingTimers(), 0);
});

t.test('an event pushes the backstop poll a whole interval from when it came', async (t) => {
  const { module, calls } = scripted();
  const { clock, follower, job } = setUp(module);
  const { providerJobId } = await follower.submit(job(), recorder().report);
  clock.advance(POLL_MS - 100);
  follower.deliverEvent(providerJobId, { type: 'pending', running: true });
  clock.advance(POLL_MS - 1);
  await settle();
  t.equal(calls.get, 0);
  clock.advance(1);
  await settle();
  t.equal(calls.get, 1);
});

t.test('a success never reported running is told running first when the module asks for it, and alone otherwise', async (t) => {
  const plain = scripted({ looks: [succeeded] });
  const before = setUp(plain.module);
  const alone = recorder();
  await before.follower.submit(before.job(), alone.report);
  before.clock.advance(POLL_MS);
  await settle();
  t.same(
    alone.updates.map((u) => u.type),
    ['succeeded'],
  );
  const { module } = scripted({ looks: [succeeded], runningBeforeSuccess: true });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job(), r.report);
  clock.advance(POLL_MS);
  await settle();
  t.same(
    r.updates.map((u) => u.type),
    ['running', 'succeeded'],
  );
});

t.test('the deadline: the overdue outcome once, the job cancelled at the provider with its notes, no poll after', async (t) => {
  const { module, calls } = scripted();
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job({ deadline: clock.now() + 2_500 }), r.report);
  clock.advance(2_499);
  await settle();
  t.equal(r.terminals().length, 0);
  clock.advance(1);
  await settle();
  t.same(r.updates, [{ type: 'failed', errorCode: 'provider_timeout', errorMessage: 'overdue' }]);
  t.same(calls.cancel, [{ id: providerJobId, notes: { n: 1 } }]);
  const polls = calls.get;
  clock.advance(10 * POLL_MS);
  await settle();
  t.equal(calls.get, polls);
  t.equal(clock.pendingTimers(), 0);
});

t.test("a module's deadline grace keeps the job followed past its deadline", async (t) => {
  const { module } = scripted({ deadlineGraceMs: 5_000 });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job({ deadline: clock.now() + 1_000 }), r.report);
  clock.advance(5_999);
  await settle();
  t.equal(r.terminals().length, 0);
  clock.advance(1);
  await settle();
  t.equal(r.terminals().length, 1);
});

t.test('cancel: following stops first, the provider is asked, and nothing is told after', async (t) => {
  const { module, calls } = scripted();
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job(), r.report);
  await follower.cancel(providerJobId);
  follower.deliverEvent(providerJobId, succeeded);
  clock.advance(100 * POLL_MS);
  await settle();
  t.same(r.updates, []);
  t.same(calls.cancel, [{ id: providerJobId, notes: { n: 1 } }]);
  t.equal(calls.get, 0);
  t.equal(clock.pendingTimers(), 0);
  await follower.cancel('p-elsewhere');
  t.same(calls.cancel.at(-1), { id: 'p-elsewhere', notes: undefined }, "another node's job still reaches the provider");
});

t.test('a cancel while the outcome is being read keeps it untold', async (t) => {
  let release!: (look: Look) => void;
  const { module } = scripted({ looks: [{ type: 'ending', settle: () => new Promise((resolve) => (release = resolve)) }] });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job(), r.report);
  clock.advance(POLL_MS);
  await settle();
  await follower.cancel(providerJobId);
  release(succeeded);
  await settle();
  t.same(r.updates, []);
});

t.test('resume: a look straight away and no submission; an id that is not one fails at once', async (t) => {
  const { module, calls } = scripted({ looks: [succeeded] });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  follower.resume('p-7', job(), r.report);
  clock.advance(0);
  await settle();
  t.equal(calls.get, 1);
  t.equal(calls.submit, 0);
  t.equal(r.terminals().length, 1);
  const bad = recorder();
  follower.resume('nonsense', job(), bad.report);
  t.same(bad.updates, [{ type: 'failed', errorCode: 'provider_error', errorMessage: 'not ours' }]);
});

t.test('an outcome that could not be read yet is followed on, and the next look ends it', async (t) => {
  const { module, calls } = scripted({
    looks: [{ type: 'ending', settle: async () => ({ type: 'pending', progress: ['the result could not be read; trying again'] }) }, succeeded],
  });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job(), r.report);
  clock.advance(POLL_MS);
  await settle();
  t.same(r.updates, [{ type: 'progress', detail: 'the result could not be read; trying again' }]);
  clock.advance(POLL_MS);
  await settle();
  t.equal(calls.get, 2);
  t.equal(r.terminals().length, 1);
});

t.test("a module's nextLookMs says when each look comes, on the clock: after a submission, a resume, an adoption, an event and a look", async (t) => {
  const afters: string[] = [];
  const delays = { submitted: 5_000, resumed: 7_000, adopted: 9_000, event: 3_000, look: 2_000 };
  const { module, calls } = scripted({
    adoption: { windowMs: 1_000, keeps: () => true, waiting: () => 'waiting' },
    nextLookMs: (_f, after) => {
      afters.push(after);
      return delays[after];
    },
  });
  const { clock, follower, job } = setUp(module);
  const { providerJobId } = await follower.submit(job(), recorder().report);
  clock.advance(4_999);
  await settle();
  t.equal(calls.get, 0, 'not at pollMs: when the module said');
  clock.advance(1);
  await settle();
  t.equal(calls.get, 1, 'the first look, 5 s after the submission');
  clock.advance(1_999);
  await settle();
  t.equal(calls.get, 1);
  clock.advance(1);
  await settle();
  t.equal(calls.get, 2, 'the next, 2 s after the look');
  clock.advance(1_000);
  follower.deliverEvent(providerJobId, { type: 'pending', running: true });
  clock.advance(2_999);
  await settle();
  t.equal(calls.get, 2, 'an event put the look 3 s after it');
  clock.advance(1);
  await settle();
  t.equal(calls.get, 3);
  await follower.cancel(providerJobId);

  follower.resume('p-9', job({ generationId: 'gen-9' }), recorder().report);
  clock.advance(6_999);
  await settle();
  t.equal(calls.get, 3, 'a resumed job is not looked at at once');
  clock.advance(1);
  await settle();
  t.equal(calls.get, 4, 'but when the module said');

  const adopted = follower.submit(job({ generationId: 'gen-3', afterRestart: true }), recorder().report);
  follower.deliverEvent('p-earlier', { type: 'pending' }, 'gen-3');
  t.same(await adopted, { providerJobId: 'p-earlier' });
  await settle();
  t.same([...new Set(afters)].sort(), ['adopted', 'event', 'look', 'resumed', 'submitted'], 'asked at each of them');
  await follower.close();
});

t.test('nextLookMs from the notes: a module that may look only after a while of silence; each event starts it again', async (t) => {
  const QUIET = 10_000;
  let now = () => 0;
  const { module, calls } = scripted({
    submit: async () => ({ providerJobId: 'p-1', notes: { n: now() + QUIET } }),
    // The notes hold when the next look may come; each event moves it a whole quiet time on.
    parseEvent: (f, payload) => {
      f.notes.n = now() + QUIET;
      return payload as Look;
    },
    nextLookMs: (f) => f.notes.n - now(),
  });
  const { clock, follower, job } = setUp(module);
  now = () => clock.now();
  const { providerJobId } = await follower.submit(job(), recorder().report);
  for (let i = 0; i < 5; i++) {
    clock.advance(QUIET - 1);
    follower.deliverEvent(providerJobId, { type: 'pending', running: true });
  }
  await settle();
  t.equal(calls.get, 0, 'heard of within each quiet time: never looked at');
  clock.advance(QUIET);
  await settle();
  t.equal(calls.get, 1, 'looked at after a whole quiet time of silence');
  await follower.close();
});

t.test('a look that throws ends the job failed with its code', async (t) => {
  const { module } = scripted({
    get: async () => {
      throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, 'garbled');
    },
  });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job(), r.report);
  clock.advance(POLL_MS);
  await settle();
  t.same(r.updates, [{ type: 'failed', errorCode: 'provider_bad_response', errorMessage: 'garbled' }]);
});

t.test('the submission window after a restart', async (t) => {
  const adoption = { windowMs: 30_000, keeps: (id: string) => id.startsWith('p-'), waiting: (ms: number) => `waiting ${ms} ms` };

  t.test("an event naming the job adopts the provider's job: no submission", async (t) => {
    const { module, calls } = scripted({ adoption });
    const { clock, follower, job } = setUp(module);
    const r = recorder();
    const submitted = follower.submit(job({ afterRestart: true }), r.report);
    clock.advance(10_000);
    follower.deliverEvent('p-earlier', { type: 'pending', running: true }, 'gen-1');
    t.same(await submitted, { providerJobId: 'p-earlier' });
    await settle();
    t.equal(calls.submit, 0);
    t.same(
      r.updates.map((u) => u.type),
      ['progress', 'running'],
    );
    follower.deliverEvent('p-earlier', succeeded);
    await settle();
    t.equal(r.terminals().length, 1);
  });

  t.test('no event within the window: submitted once, when the window ends on the clock', async (t) => {
    const { module, calls } = scripted({ adoption });
    const { clock, follower, job } = setUp(module);
    const r = recorder();
    const submitted = follower.submit(job({ afterRestart: true }), r.report);
    clock.advance(29_999);
    await settle();
    t.equal(calls.submit, 0);
    clock.advance(1);
    t.same(await submitted, { providerJobId: 'p-1' });
    t.equal(calls.submit, 1);
    t.same(r.updates, [{ type: 'progress', detail: 'waiting 30000 ms' }]);
  });

  t.test('a job handed over for the first time does not wait', async (t) => {
    const { module, calls } = scripted({ adoption });
    const { follower, job } = setUp(module);
    await follower.submit(job(), recorder().report);
    t.equal(calls.submit, 1);
  });

  t.test('a cancel under its own id during the window stops the wait: never submitted, not even when the window ends', async (t) => {
    const { module, calls } = scripted({ adoption });
    const { clock, follower, job } = setUp(module);
    const submitted = follower.submit(job({ afterRestart: true }), recorder().report);
    clock.advance(10_000);
    await follower.cancel('gen-1');
    await t.rejects(submitted, { code: 'provider_cancelled' });
    clock.advance(30_000);
    await settle();
    t.equal(calls.submit, 0, 'nothing handed over');
    t.equal(clock.pendingTimers(), 0, 'the window left no timer');
  });
});

t.test("a stream's deltas are told as they come, running first; at the end it drains up to drainMs on the clock", async (t) => {
  let push!: (delta: string) => void;
  let finish!: () => void;
  const { module } = scripted({
    drainMs: 2_000,
    submitted: {
      stream: (onDelta) =>
        new Promise<void>((resolve) => {
          push = onDelta;
          finish = resolve;
        }),
    },
  });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job(), r.report);
  await settle();
  push('Hel');
  push('lo');
  follower.deliverEvent(providerJobId, { type: 'over', update: { type: 'succeeded', textOutput: 'Hello!', files: [] } });
  await settle();
  push('!');
  t.equal(r.terminals().length, 0, 'the outcome waits for the stream');
  finish();
  await settle();
  t.same(r.updates, [
    { type: 'running' },
    { type: 'output', delta: 'Hel' },
    { type: 'output', delta: 'lo' },
    { type: 'output', delta: '!' },
    { type: 'succeeded', textOutput: 'Hello!', files: [] },
  ]);

  const stuck = recorder();
  const second = await follower.submit(job({ generationId: 'gen-2' }), stuck.report);
  await settle();
  follower.deliverEvent(second.providerJobId, succeeded);
  await settle();
  clock.advance(1_999);
  await settle();
  t.equal(stuck.terminals().length, 0);
  clock.advance(1);
  await settle();
  t.equal(stuck.terminals().length, 1, 'a stream that never ends holds the outcome drainMs at most');
});

t.test('close: nothing is told after it, no timer is left, and a submission is refused', async (t) => {
  const { module } = scripted();
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job(), r.report);
  await follower.close();
  follower.deliverEvent(providerJobId, succeeded);
  clock.advance(100 * POLL_MS);
  await settle();
  t.same(r.updates, []);
  t.equal(clock.pendingTimers(), 0);
  await t.rejects(follower.submit(job(), r.report), { code: 'provider_unavailable' });
});

t.test('a provider whose job id is our generation id (byProviderJobId)', async (t) => {
  const adoption = { windowMs: 5_000, keepMs: 60_000, byProviderJobId: true, keeps: () => true, waiting: (ms: number) => `waiting ${ms} ms` };

  t.test("an event that beat the submission's answer is taken once the job is followed", async (t) => {
    let answer!: () => void;
    const { module } = scripted({
      adoption,
      submit: async (job) => {
        await new Promise<void>((resolve) => (answer = resolve));
        return { providerJobId: job.generationId, notes: { n: 1 } };
      },
    });
    const { follower, job } = setUp(module);
    const r = recorder();
    const submitted = follower.submit(job(), r.report);
    await settle();
    follower.deliverEvent('gen-1', { type: 'pending', running: true });
    answer();
    t.same(await submitted, { providerJobId: 'gen-1' });
    t.same(r.updates, [], 'told after submit resolved');
    await settle();
    t.same(r.updates, [{ type: 'running' }]);
  });

  t.test('a resume takes the end that came before it', async (t) => {
    const { module } = scripted({ adoption, resume: () => ({ notes: { n: 0 } }) });
    const { follower, job } = setUp(module);
    follower.deliverEvent('gen-9', succeeded);
    const r = recorder();
    follower.resume('gen-9', job({ generationId: 'gen-9' }), r.report);
    await settle();
    t.equal(r.terminals().length, 1);
  });

  t.test('a cancel stops a submission still waiting (for a free slot), on the clock', async (t) => {
    const { module } = scripted({
      adoption,
      submit: async (job, call) => {
        await call.wait(60_000);
        if (call.signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'cancelled before it was taken');
        return { providerJobId: job.generationId, notes: { n: 1 } };
      },
    });
    const { clock, follower, job } = setUp(module);
    const submitted = follower.submit(job(), recorder().report);
    await settle();
    await follower.cancel('gen-1');
    await t.rejects(submitted, { code: 'provider_cancelled' });
    t.equal(clock.pendingTimers(), 0);
  });
});

t.test('a lookNow while a look is in flight: one more look right after it, not a poll interval later', async (t) => {
  let release!: (look: Look) => void;
  let gets = 0;
  const { module } = scripted({
    get: () => {
      gets += 1;
      return gets === 1 ? new Promise<Look>((resolve) => (release = resolve)) : Promise.resolve(succeeded);
    },
  });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job(), r.report);
  clock.advance(POLL_MS);
  await settle();
  t.equal(gets, 1, 'the first look is in flight');
  follower.deliverEvent(providerJobId, { type: 'lookNow' });
  await settle();
  t.equal(gets, 1, 'not two looks at once');
  release({ type: 'pending', running: true });
  await settle();
  clock.advance(0);
  await settle();
  t.equal(gets, 2, 'the next look at once');
  t.same(r.updates, [{ type: 'running' }, { type: 'succeeded', files: [] }]);

  const { module: asking, calls } = scripted({ looks: [{ type: 'lookNow' }, succeeded] });
  const second = setUp(asking);
  const done = recorder();
  await second.follower.submit(second.job(), done.report);
  second.clock.advance(POLL_MS);
  await settle();
  second.clock.advance(0);
  await settle();
  t.equal(calls.get, 2, 'a look that says lookNow is followed by another at once');
  t.equal(done.terminals().length, 1);
});

/** A module with a watch (a socket) the test drives: it opens, tells, drops. */
function watched(extra: Partial<ProtocolModule<Notes>> = {}) {
  const opened: Array<{ tell: (look: Look) => void; drop: () => void; closedByUs: boolean }> = [];
  const scriptedModule = scripted({
    ...extra,
    watch: (_f, tell) => {
      let drop!: () => void;
      const closed = new Promise<void>((resolve) => (drop = resolve));
      const entry = { tell, drop, closedByUs: false };
      opened.push(entry);
      return {
        closed,
        close() {
          entry.closedByUs = true;
          drop();
        },
      };
    },
  });
  return { ...scriptedModule, opened };
}

t.test("a module's watch: opened once the job is followed, what it tells is told, the backstop keeps its pace, closed at the end", async (t) => {
  const { module, calls, opened } = watched();
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job(), r.report);
  t.equal(opened.length, 0, 'not before submit answered');
  await settle();
  t.equal(opened.length, 1, 'opened after it');
  clock.advance(POLL_MS - 100);
  opened[0]!.tell({ type: 'pending', running: true, progress: ['Step 1 of 3.'] });
  clock.advance(100);
  await settle();
  t.equal(calls.get, 1, 'what the watch tells does not push the backstop poll');
  opened[0]!.tell({ type: 'lookNow' });
  clock.advance(0);
  await settle();
  t.equal(calls.get, 2, 'a lookNow from the watch: a look at once');
  opened[0]!.tell(succeeded);
  await settle();
  t.same(r.updates, [{ type: 'running' }, { type: 'progress', detail: 'Step 1 of 3.' }, { type: 'succeeded', files: [] }]);
  t.ok(opened[0]!.closedByUs, 'closed at the end');
  t.equal(clock.pendingTimers(), 0);

  const resumed = recorder();
  follower.resume('p-9', job({ generationId: 'gen-9' }), resumed.report);
  await settle();
  t.equal(opened.length, 2, 'a resumed job is watched too');
  await follower.close();
  t.ok(opened[1]!.closedByUs, 'and closed with the follower');
});

t.test('a watch that drops: a look at once, opened again after pollMs, doubling while it keeps dropping, back to pollMs once it tells', async (t) => {
  const { module, calls, opened } = watched({ watchRetryMaxMs: 3_000 });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job({ deadline: clock.now() + 600_000 }), r.report);
  await settle();
  const dropAndReopen = async (afterMs: number, what: string) => {
    const before = opened.length;
    const gets = calls.get;
    opened.at(-1)!.drop();
    await settle();
    clock.advance(0);
    await settle();
    t.equal(calls.get, gets + 1, `${what}: a look at once`);
    clock.advance(afterMs - 1);
    await settle();
    t.equal(opened.length, before, `${what}: not reopened before ${afterMs} ms`);
    clock.advance(1);
    await settle();
    t.equal(opened.length, before + 1, `${what}: reopened after ${afterMs} ms`);
  };
  await dropAndReopen(POLL_MS, 'first drop');
  await dropAndReopen(2 * POLL_MS, 'second drop');
  await dropAndReopen(3_000, 'third drop, at watchRetryMaxMs');
  opened.at(-1)!.tell({ type: 'pending' });
  await dropAndReopen(POLL_MS, 'after it told something');
  await follower.close();
  t.same(r.terminals(), []);
  t.equal(clock.pendingTimers(), 0);
});

t.test('cancelBeforeOverdue: the overdue outcome is told once the cancel is done, and not at all after our own cancel', async (t) => {
  const answers: Array<() => void> = [];
  const { module, calls } = scripted({
    cancelBeforeOverdue: true,
    cancel: (id, notes) => {
      calls.cancel.push({ id, notes });
      return new Promise<void>((resolve) => answers.push(resolve));
    },
  });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  const { providerJobId } = await follower.submit(job({ deadline: clock.now() + 2_500 }), r.report);
  clock.advance(2_500);
  await settle();
  t.same(calls.cancel, [{ id: providerJobId, notes: { n: 1 } }], 'the cancel went out');
  t.same(r.updates, [], 'the outcome waits for it');
  const polls = calls.get;
  follower.deliverEvent(providerJobId, succeeded);
  clock.advance(10 * POLL_MS);
  await settle();
  t.equal(calls.get, polls, 'no look meanwhile');
  t.same(r.updates, [], 'nothing else is told meanwhile');
  answers.shift()!();
  await settle();
  t.same(r.updates, [{ type: 'failed', errorCode: 'provider_timeout', errorMessage: 'overdue' }]);
  t.equal(clock.pendingTimers(), 0);

  const quiet = recorder();
  const second = await follower.submit(job({ generationId: 'gen-2', deadline: clock.now() + 1_000 }), quiet.report);
  clock.advance(1_000);
  await settle();
  const ours = follower.cancel(second.providerJobId);
  t.equal(answers.length, 2, 'the overdue cancel, and ours');
  for (const answer of answers.splice(0)) answer();
  await ours;
  await settle();
  t.same(quiet.updates, [], 'our cancel while the overdue one is out: nothing told');
});

/** A module whose jobs are answered within their request (`answer`, as OpenAI's): the test holds each request. */
function answering(extra: Partial<ProtocolModule<Notes>> = {}) {
  const asked: Array<{ call: AnswerCall; answer: (look: Look) => void; fail: (error: unknown) => void }> = [];
  const scriptedModule = scripted({
    ...extra,
    submitted: { answer: (call) => new Promise<Look>((answer, fail) => asked.push({ call, answer, fail })) },
  });
  return { ...scriptedModule, asked };
}

const hello: TerminalUpdate = { type: 'succeeded', textOutput: 'Hello', files: [] };
const answered: Look = { type: 'over', update: hello };

t.test(
  'a job answered within its request: asked once submit answered, running first, each piece told at once, the answer its outcome, nothing looked up',
  async (t) => {
    const { module, calls, asked } = answering();
    const { clock, follower, job } = setUp(module);
    const r = recorder();
    t.same(await follower.submit(job(), r.report), { providerJobId: 'p-1' });
    t.equal(asked.length, 0, 'not asked before the caller holds the id');
    await settle();
    t.equal(asked.length, 1, 'asked once');
    t.same(r.updates, [{ type: 'running' }], 'running as the request goes out');
    const { call, answer } = asked[0]!;
    call.output('Hel');
    t.same(r.updates.at(-1), { type: 'output', delta: 'Hel' }, 'told as it comes, with no turn in between');
    call.output('');
    call.output('lo');
    clock.advance(10 * POLL_MS);
    await settle();
    t.equal(calls.get, 0, 'no backstop poll: nothing to look up');
    answer(answered);
    await settle();
    call.output('late');
    t.same(r.updates, [{ type: 'running' }, { type: 'output', delta: 'Hel' }, { type: 'output', delta: 'lo' }, hello]);
    t.ok(call.signal.aborted, 'its signal is done with at the end');
    t.equal(follower.size, 0);
    t.equal(clock.pendingTimers(), 0, 'no timer left behind');

    const failing = recorder();
    await follower.submit(job({ generationId: 'gen-2' }), failing.report);
    await settle();
    asked[1]!.fail(new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, 'connection reset'));
    await settle();
    t.same(failing.terminals(), [{ type: 'failed', errorCode: 'provider_unavailable', errorMessage: 'connection reset' }], 'a throw: failed with its code');
  },
);

t.test("a request's waits are on the clock and its lines go to the timeline", async (t) => {
  const { module } = scripted({
    submitted: {
      answer: async (call) => {
        call.say('429: trying again in 5000 ms.');
        await call.wait(5_000);
        return answered;
      },
    },
  });
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job(), r.report);
  await settle();
  clock.advance(4_999);
  await settle();
  t.equal(r.terminals().length, 0);
  clock.advance(1);
  await settle();
  t.same(r.updates, [{ type: 'running' }, { type: 'progress', detail: '429: trying again in 5000 ms.' }, hello]);
  t.equal(clock.pendingTimers(), 0);
});

t.test('a cancel aborts the request in flight and tells nothing after; one before the request went out keeps it from going', async (t) => {
  const { module, calls, asked } = answering();
  const { clock, follower, job } = setUp(module);
  const early = recorder();
  const first = await follower.submit(job(), early.report);
  await follower.cancel(first.providerJobId);
  await settle();
  t.equal(asked.length, 0, 'never asked');
  t.same(early.updates, [], 'nothing told, not even running');

  const r = recorder();
  const { providerJobId } = await follower.submit(job({ generationId: 'gen-2' }), r.report);
  await settle();
  const { call, answer } = asked[0]!;
  call.output('a');
  t.notOk(call.signal.aborted);
  await follower.cancel(providerJobId);
  t.ok(call.signal.aborted, 'the request is aborted');
  t.same(calls.cancel.at(-1), { id: providerJobId, notes: { n: 2 } }, 'the module is asked too');
  call.output('b');
  answer(answered);
  await settle();
  t.same(r.updates, [{ type: 'running' }, { type: 'output', delta: 'a' }], 'nothing after the cancel');
  t.equal(clock.pendingTimers(), 0);
});

t.test('the deadline of a request still out: the overdue outcome on the clock, the request aborted, nothing of it told after', async (t) => {
  const { module, asked } = answering();
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job({ deadline: clock.now() + 2_500 }), r.report);
  await settle();
  const { call, answer } = asked[0]!;
  call.output('a');
  clock.advance(2_499);
  await settle();
  t.equal(r.terminals().length, 0);
  t.notOk(call.signal.aborted);
  clock.advance(1);
  t.ok(call.signal.aborted, 'aborted at the deadline');
  call.output('b');
  answer(answered);
  await settle();
  t.same(r.updates, [{ type: 'running' }, { type: 'output', delta: 'a' }, { type: 'failed', errorCode: 'provider_timeout', errorMessage: 'overdue' }]);
  t.equal(clock.pendingTimers(), 0);
});

t.test('a resume while the request is out hands its answer to the new report: not asked again, not looked up', async (t) => {
  let resumes = 0;
  const { module, calls, asked } = answering({
    resume: () => {
      resumes += 1;
      return { notes: { n: 0 } };
    },
  });
  const { clock, follower, job } = setUp(module);
  const first = recorder();
  const { providerJobId } = await follower.submit(job(), first.report);
  await settle();
  asked[0]!.call.output('a');
  const second = recorder();
  follower.resume(providerJobId, job(), second.report);
  asked[0]!.call.output('b');
  asked[0]!.answer(answered);
  await settle();
  t.same(first.updates, [{ type: 'running' }, { type: 'output', delta: 'a' }]);
  t.same(second.updates, [{ type: 'output', delta: 'b' }, hello], 'the next pieces and the outcome');
  t.equal(asked.length, 1, 'asked once');
  t.equal(resumes, 0, 'the module was not asked to resume it');
  t.equal(calls.get, 0);
  t.equal(clock.pendingTimers(), 0);
});

t.test('an answer whose outputs are still to read: the deadline no longer cuts it, a cancel still does', async (t) => {
  const settling: Array<(look: Look) => void> = [];
  const { module, asked } = answering();
  const { clock, follower, job } = setUp(module);
  const ending: Look = { type: 'ending', settle: () => new Promise<Look>((resolve) => settling.push(resolve)) };
  const r = recorder();
  await follower.submit(job({ deadline: clock.now() + 2_500 }), r.report);
  await settle();
  asked[0]!.answer(ending);
  await settle();
  t.equal(settling.length, 1, 'its outputs are being read');
  clock.advance(10_000);
  await settle();
  t.same(r.terminals(), [], 'past the deadline, still read');
  settling[0]!(answered);
  await settle();
  t.same(r.updates, [{ type: 'running' }, hello]);

  const cancelled = recorder();
  const { providerJobId } = await follower.submit(job({ generationId: 'gen-2', deadline: clock.now() + 2_500 }), cancelled.report);
  await settle();
  asked[1]!.answer(ending);
  await settle();
  await follower.cancel(providerJobId);
  settling[1]!(answered);
  await settle();
  t.same(cancelled.updates, [{ type: 'running' }], 'nothing told after the cancel');
  t.equal(clock.pendingTimers(), 0);
});

t.test('close aborts the requests in flight and tells nothing more', async (t) => {
  const { module, asked } = answering();
  const { clock, follower, job } = setUp(module);
  const r = recorder();
  await follower.submit(job(), r.report);
  await settle();
  await follower.close();
  t.ok(asked[0]!.call.signal.aborted);
  asked[0]!.call.output('late');
  asked[0]!.answer(answered);
  await settle();
  t.same(r.updates, [{ type: 'running' }]);
  t.equal(clock.pendingTimers(), 0);
});
