import t from 'tap';
import { decide, initialState, MAX_ATTEMPTS, MAX_NOTES, type GenerationCommand, type GenerationState } from '../../actors/generation/machine.ts';

/**
 * What each decision of the generation machine does exactly: its effects in full, its settlement's money, and
 * what it writes to the timeline. The lifecycle as a whole is in generation-machine.test.ts.
 */

const T0 = Date.UTC(2026, 0, 1);
const TIMEOUT = 600_000;
const ROUTE = { deploymentId: 'first', provider: 'local' };

function drive(commands: GenerationCommand[]): GenerationState {
  let state = initialState(T0, TIMEOUT, ROUTE);
  for (const command of commands) {
    const d = decide(state, command, T0);
    if (!d.ok) throw new Error(d.message);
    state = d.state;
  }
  return state;
}

const reserved = (): GenerationState => drive([{ type: 'reserve' }]);
const running = (): GenerationState => drive([{ type: 'reserve' }, { type: 'submitted', providerJobId: 'p1' }, { type: 'started' }]);

t.test('a new job: queued until its deadline, on its route, with nothing run, produced or failed', async (t) => {
  t.strictSame(initialState(T0, TIMEOUT, ROUTE), {
    status: 'queued',
    queueDeadline: new Date(T0 + TIMEOUT),
    startedAt: null,
    completedAt: null,
    providerJobId: null,
    deploymentId: 'first',
    provider: 'local',
    attempts: 0,
    textOutput: null,
    outputAssetIds: [],
    errorCode: null,
    errorMessage: null,
    timeline: [{ status: 'queued', at: new Date(T0).toISOString() }],
  });
});

t.test('leaving the queue ends its timer and hands the job to its provider, one attempt counted', async (t) => {
  const d = decide(initialState(T0, TIMEOUT, ROUTE), { type: 'reserve' }, T0);
  if (!d.ok) return t.fail(d.message);
  t.strictSame(d.effects, [{ type: 'cancel_queue_timer' }, { type: 'submit_to_provider' }]);
  t.equal(d.state.attempts, 1);
  t.equal(d.settle, undefined, 'not settled: its credits stay held');
});

t.test('a job that streamed part of its answer is charged when it fails or is cancelled; otherwise released', async (t) => {
  const fail = (charge?: boolean) => decide(running(), { type: 'fail', errorCode: 'provider_error', errorMessage: 'cut off', charge }, T0);
  const cancel = (charge?: boolean) => decide(running(), { type: 'cancel', by: 'user', charge }, T0);
  for (const [what, d, money] of [
    ['fail, charged', fail(true), 'capture'],
    ['fail, not charged', fail(false), 'release'],
    ['fail', fail(), 'release'],
    ['cancel, charged', cancel(true), 'capture'],
    ['cancel, not charged', cancel(false), 'release'],
    ['cancel', cancel(), 'release'],
  ] as const) {
    t.same(d.ok && d.settle, { money, heldSlot: true }, what);
  }
});

t.test('cancel: exactly the effects its state needs, and who cancelled in the timeline', async (t) => {
  const effects = (state: GenerationState, by: 'user' | 'operator' = 'user') => {
    const d = decide(state, { type: 'cancel', by }, T0);
    if (!d.ok) throw new Error(d.message);
    return d;
  };
  t.strictSame(effects(initialState(T0, TIMEOUT, ROUTE)).effects, [{ type: 'cancel_queue_timer' }], 'queued: its timer');
  t.strictSame(effects(reserved()).effects, [], 'reserved: nothing at its provider yet');
  t.strictSame(effects(running()).effects, [{ type: 'cancel_at_provider', providerJobId: 'p1' }], 'running: stopped at its provider');
  t.strictSame(effects({ ...running(), providerJobId: null }).effects, [], 'running under no known id: nothing to stop');
  t.same(effects(running(), 'operator').state.timeline.at(-1), { status: 'cancelled', at: new Date(T0).toISOString(), detail: 'by operator' });
  t.same(effects(running(), 'user').state.timeline.at(-1)?.detail, 'by user');
});

t.test('resume: a job its provider cannot look up, or not handed over yet, is handed over again', async (t) => {
  const notLookedUp = decide(running(), { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false }, T0);
  if (!notLookedUp.ok) return t.fail(notLookedUp.message);
  t.strictSame(notLookedUp.effects, [{ type: 'submit_to_provider', afterRestart: true }], 'its provider keeps nothing to follow: handed over again');
  t.equal(notLookedUp.state.providerJobId, null);
  t.equal(notLookedUp.state.attempts, 2);

  const stillReserved = decide(reserved(), { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true }, T0);
  if (!stillReserved.ok) return t.fail(stillReserved.message);
  t.strictSame(stillReserved.effects, [{ type: 'submit_to_provider', afterRestart: true }], 'reserved: nothing to follow at its provider yet');
  t.equal(stillReserved.state.status, 'reserved');
});

t.test('resume of an in-request job never handed over: handed over, not failed', async (t) => {
  // Its submitted rode unwritten only once it was handed over; a job with no attempt cannot have gone out.
  const never = decide({ ...reserved(), attempts: 0 }, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true, inRequest: true }, T0);
  if (!never.ok) return t.fail(never.message);
  t.equal(never.state.status, 'reserved');
  t.strictSame(never.effects, [{ type: 'submit_to_provider', afterRestart: true }]);
  t.equal(never.settle, undefined);
  const once = decide(reserved(), { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true, inRequest: true }, T0);
  t.equal(once.ok && once.state.status, 'failed', 'handed over once: it may have run, so it is failed');
});

t.test('what a provider or a router writes to the timeline is cut at 500 characters', async (t) => {
  const long = 'x'.repeat(600);
  const noted = decide(running(), { type: 'note', detail: long }, T0);
  t.equal(noted.ok && noted.state.timeline.at(-1)?.detail, 'x'.repeat(500));
  const rerouted = decide(running(), { type: 'reroute', deploymentId: 'second', provider: 'replicate', detail: long }, T0);
  t.equal(rerouted.ok && rerouted.state.timeline.at(-1)?.detail, 'x'.repeat(500));
});

t.test('notes: each status keeps MAX_NOTES of them, its own entry and other statuses not counted', async (t) => {
  let state = running();
  for (let i = 0; i < MAX_NOTES; i++) {
    const d = decide(state, { type: 'note', detail: `line ${i}` }, T0);
    if (!d.ok) return t.fail(`note ${i} left out: ${d.message}`);
    state = d.state;
  }
  t.notOk(decide(state, { type: 'note', detail: 'one more' }, T0).ok, `the note after ${MAX_NOTES} is left out`);
  // A reserved job's notes do not count against its notes once running.
  let early = reserved();
  for (let i = 0; i < 3; i++) {
    const d = decide(early, { type: 'note', detail: `waiting ${i}` }, T0);
    if (d.ok) early = d.state;
  }
  let later = early;
  for (const command of [{ type: 'submitted', providerJobId: 'p1' }, { type: 'started' }] as GenerationCommand[]) {
    const d = decide(later, command, T0);
    if (!d.ok) return t.fail(d.message);
    later = d.state;
  }
  for (let i = 0; i < MAX_NOTES; i++) {
    const d = decide(later, { type: 'note', detail: `line ${i}` }, T0);
    if (!d.ok) return t.fail(`running note ${i} left out after 3 reserved notes`);
    later = d.state;
  }
});

t.test('a refusal says what was asked and of a job in which state', async (t) => {
  const d = decide(drive([{ type: 'cancel', by: 'user' }]), { type: 'reserve' }, T0);
  t.match(d, { ok: false, reason: 'conflict', message: /\breserve\b.*\bcancelled\b/ });
});
