import t from 'tap';
import { decide, initialState, MAX_ATTEMPTS, MAX_NOTES, type GenerationCommand, type GenerationState } from '../../actors/generation/machine.ts';
import { EVENT_OF, GENERATION_STATUSES, isTerminal, TERMINAL_STATUSES, type GenerationStatus } from '../../domain/generation-status.ts';

const T0 = Date.UTC(2026, 0, 1);
const TIMEOUT = 600_000;
const ROUTE = { deploymentId: 'first', provider: 'local' };

/** Drives a fresh generation through the given commands, failing the test on any refusal. */
function drive(commands: GenerationCommand[], now = T0): GenerationState {
  let state = initialState(T0, TIMEOUT, ROUTE);
  for (const command of commands) {
    const decision = decide(state, command, now);
    if (!decision.ok) throw new Error(decision.message);
    state = decision.state;
  }
  return state;
}

const at: Record<GenerationStatus, GenerationCommand[]> = {
  queued: [],
  reserved: [{ type: 'reserve' }],
  submitted: [{ type: 'reserve' }, { type: 'submitted', providerJobId: 'p1' }],
  running: [{ type: 'reserve' }, { type: 'submitted', providerJobId: 'p1' }, { type: 'started' }],
  succeeded: [
    { type: 'reserve' },
    { type: 'submitted', providerJobId: 'p1' },
    { type: 'started' },
    { type: 'succeed', outputs: { outputAssetIds: ['ast_1'] } },
  ],
  failed: [{ type: 'fail', errorCode: 'provider_error', errorMessage: 'boom' }],
  cancelled: [{ type: 'cancel', by: 'user' }],
  expired: [{ type: 'expire' }],
};

t.test('the happy path records every step in the timeline and ends with capture and the completed event', async (t) => {
  const state = drive(at.succeeded, T0 + TIMEOUT);
  t.equal(state.status, 'succeeded');
  t.same(
    state.timeline.map((e) => e.status),
    ['queued', 'reserved', 'submitted', 'running', 'succeeded'],
  );
  t.same(state.outputAssetIds, ['ast_1']);
  t.ok(state.startedAt);
  t.ok(state.completedAt);
  const last = decide(drive(at.running), { type: 'succeed', outputs: { outputAssetIds: [], textOutput: 'hi' } }, T0);
  t.ok(last.ok);
  if (last.ok) {
    t.same(last.effects, [], 'nothing more to do than its settlement');
    t.same(last.settle, { money: 'capture', heldSlot: true }, 'settled: credits captured, its slot freed');
    t.equal(EVENT_OF.succeeded, 'generation.completed', 'with the completed event');
    t.equal(last.state.textOutput, 'hi');
  }
});

t.test('cancel is accepted in every non-terminal state and refused (conflict) in every terminal one', async (t) => {
  for (const status of GENERATION_STATUSES) {
    const decision = decide(drive(at[status], T0 + TIMEOUT), { type: 'cancel', by: 'user' }, T0 + TIMEOUT);
    if (isTerminal(status)) {
      t.notOk(decision.ok, `cancel refused when ${status}`);
      if (!decision.ok) t.equal(decision.reason, 'conflict');
      continue;
    }
    t.ok(decision.ok, `cancel accepted when ${status}`);
    if (!decision.ok) continue;
    t.equal(decision.state.status, 'cancelled');
    const types = decision.effects.map((e) => e.type);
    t.equal(decision.settle?.money, 'release', 'credits are released, never captured on cancel');
    t.equal(decision.settle?.heldSlot, status !== 'queued', 'a slot is freed only if one was held');
    t.equal(types.includes('cancel_queue_timer'), status === 'queued');
    t.equal(types.includes('cancel_at_provider'), status === 'submitted' || status === 'running');
  }
});

t.test('failure from any non-terminal state releases credits and carries its code', async (t) => {
  for (const status of ['queued', 'reserved', 'submitted', 'running'] as const) {
    const decision = decide(drive(at[status]), { type: 'fail', errorCode: 'provider_timeout', errorMessage: 'no answer in 60 s' }, T0);
    t.ok(decision.ok, status);
    if (!decision.ok) continue;
    t.equal(decision.state.errorCode, 'provider_timeout');
    t.equal(decision.state.errorMessage, 'no answer in 60 s');
    t.equal(decision.settle?.money, 'release');
    t.equal(
      decision.effects.some((e) => e.type === 'cancel_queue_timer'),
      status === 'queued',
      `the queue timer is cancelled only when failing from queued (${status})`,
    );
    t.equal(decision.settle?.heldSlot, status !== 'queued', `a slot is freed only if one was held (${status})`);
  }
  const fromQueued = decide(initialState(T0, TIMEOUT, ROUTE), { type: 'fail', errorCode: 'provider_error', errorMessage: 'boom' }, T0);
  t.ok(fromQueued.ok);
  if (fromQueued.ok) {
    t.same(fromQueued.effects, [{ type: 'cancel_queue_timer' }], 'fail from queued: the timer is cancelled');
    t.same(fromQueued.settle, { money: 'release', heldSlot: false }, 'credits released, no slot to free (the event goes with the settlement)');
  }
});

t.test('expiry: only from queued, only once the deadline has passed', async (t) => {
  const queued = initialState(T0, TIMEOUT, ROUTE);
  const early = decide(queued, { type: 'expire' }, T0 + TIMEOUT - 1);
  t.notOk(early.ok);
  if (!early.ok) t.equal(early.reason, 'too_early');
  t.strictSame(queued, initialState(T0, TIMEOUT, ROUTE), 'a refused expiry leaves the state as it was');
  t.strictSame(Object.keys(early).sort(), ['message', 'ok', 'reason'], 'and carries no effects');
  const due = decide(initialState(T0, TIMEOUT, ROUTE), { type: 'expire' }, T0 + TIMEOUT);
  t.ok(due.ok);
  if (due.ok) {
    t.equal(due.state.status, 'expired');
    t.same(due.effects, []);
    t.same(due.settle, { money: 'release', heldSlot: false });
    t.equal(EVENT_OF.expired, 'generation.expired');
  }
  for (const status of ['reserved', 'submitted', 'running'] as const) {
    t.notOk(decide(drive(at[status]), { type: 'expire' }, T0 + TIMEOUT * 2).ok, `a ${status} job never expires`);
  }
});

t.test('every out-of-order step is refused and leaves the state as it was', async (t) => {
  const commands: GenerationCommand[] = [
    { type: 'reserve' },
    { type: 'submitted', providerJobId: 'p' },
    { type: 'started' },
    { type: 'succeed', outputs: { outputAssetIds: [] } },
    { type: 'fail', errorCode: 'x', errorMessage: 'y' },
    { type: 'cancel', by: 'operator' },
    { type: 'expire' },
    { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false },
    { type: 'note', detail: 'n' },
    { type: 'reroute', deploymentId: 'd2', provider: 'local', detail: 'x' },
  ];
  const allowed: Record<GenerationCommand['type'], GenerationStatus[]> = {
    reserve: ['queued'],
    submitted: ['reserved', 'submitted', 'running'],
    started: ['submitted'],
    succeed: ['running'],
    resume: ['reserved', 'submitted', 'running'],
    note: ['reserved', 'submitted', 'running'],
    reroute: ['reserved', 'submitted', 'running'],
    fail: ['queued', 'reserved', 'submitted', 'running'],
    cancel: ['queued', 'reserved', 'submitted', 'running'],
    expire: ['queued'],
  };
  for (const status of GENERATION_STATUSES) {
    for (const command of commands) {
      const before = drive(at[status], T0 + TIMEOUT);
      const snapshot = structuredClone(before);
      const decision = decide(before, command, T0 + TIMEOUT);
      t.equal(decision.ok, allowed[command.type].includes(status), `${command.type} from ${status}`);
      if (decision.ok) continue;
      t.strictSame(before, snapshot, `${command.type} from ${status} leaves the state as it was`);
      t.strictSame(Object.keys(decision).sort(), ['message', 'ok', 'reason'], `${command.type} from ${status} carries no new state and no effects`);
      t.equal(decision.reason, 'conflict');
    }
  }
  t.same([...TERMINAL_STATUSES].sort(), ['cancelled', 'expired', 'failed', 'succeeded']);
});

t.test('resume after a restart: an in-flight job is handed to its provider again, keeping its status, counting attempts', async (t) => {
  t.equal(initialState(T0, TIMEOUT, ROUTE).attempts, 0, 'a queued job has made no attempt');
  t.equal(drive(at.reserved).attempts, 1, 'reserving counts the first hand-over, before it is made');
  for (const status of ['reserved', 'submitted', 'running'] as const) {
    const before = drive(at[status]);
    const decision = decide(before, { type: 'resume', maxAttempts: 3, lookUp: false }, T0 + 5);
    t.ok(decision.ok, `resume from ${status}`);
    if (!decision.ok) continue;
    t.equal(decision.state.status, status, 'the status never goes back');
    t.equal(decision.state.attempts, 2);
    t.equal(decision.state.providerJobId, null, 'the old provider job belonged to the stopped process');
    t.same(decision.effects, [{ type: 'submit_to_provider', afterRestart: true }]);
    t.equal(decision.settle, undefined, 'no money moves and the slot stays held');
    t.same(decision.state.timeline.at(-1), { status, at: new Date(T0 + 5).toISOString(), detail: 'resubmitted after a restart (attempt 2 of 3)' });
  }
  // The provider takes the job again: a job still reserved moves on, one further along keeps its status and learns the new id.
  const resubmitted = (status: 'reserved' | 'submitted' | 'running') => {
    const d = decide(drive(at[status]), { type: 'resume', maxAttempts: 3, lookUp: false }, T0);
    if (!d.ok) throw new Error(d.message);
    return d.state;
  };
  const fromReserved = decide(resubmitted('reserved'), { type: 'submitted', providerJobId: 'p2' }, T0);
  t.ok(fromReserved.ok && fromReserved.state.status === 'submitted' && fromReserved.state.providerJobId === 'p2');
  const fromRunning = decide(resubmitted('running'), { type: 'submitted', providerJobId: 'p2' }, T0);
  t.ok(fromRunning.ok);
  if (fromRunning.ok) {
    t.equal(fromRunning.state.status, 'running');
    t.equal(fromRunning.state.providerJobId, 'p2');
    t.equal(fromRunning.state.timeline.length, resubmitted('running').timeline.length, 'no timeline entry for a new provider id');
    const done = decide(fromRunning.state, { type: 'succeed', outputs: { outputAssetIds: [], textOutput: 'hi' } }, T0);
    t.ok(done.ok);
    if (done.ok) t.same(done.settle, { money: 'capture', heldSlot: true }, 'captured once, at the end');
  }
  t.notOk(decide(resubmitted('running'), { type: 'started' }, T0).ok, 'a running job re-run stays running when the provider says so again');
});

t.test('resume past the attempt limit fails with attempts_exhausted and releases the credits', async (t) => {
  t.equal(MAX_ATTEMPTS, 3, 'the documented limit');
  let state = drive(at.running);
  for (let attempt = 2; attempt <= MAX_ATTEMPTS; attempt++) {
    const d = decide(state, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false }, T0);
    if (!d.ok) throw new Error(d.message);
    t.equal(d.state.attempts, attempt);
    state = d.state;
  }
  const last = decide(state, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false }, T0);
  t.ok(last.ok);
  if (!last.ok) return;
  t.equal(last.state.status, 'failed');
  t.equal(last.state.errorCode, 'attempts_exhausted');
  t.match(last.state.errorMessage, /handed to its provider 3 times \(the limit is 3\)/);
  t.notMatch(last.state.errorMessage, /;/);
  t.equal(last.state.attempts, MAX_ATTEMPTS, 'no attempt is counted for a hand-over not made');
  t.same(last.effects, []);
  t.same(last.settle, { money: 'release', heldSlot: true });
  t.notOk(decide(drive(at.queued), { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false }, T0).ok, 'a queued job is not resumed: it waits for a slot');
});

t.test('the attempts_exhausted message counts the attempts in words that agree with the number', async (t) => {
  const once = decide(drive(at.reserved), { type: 'resume', maxAttempts: 1, lookUp: false }, T0);
  t.ok(once.ok);
  if (once.ok) t.match(once.state.errorMessage, /handed to its provider 1 time \(the limit is 1\)/);
  const twice = decide(drive([...at.reserved, { type: 'resume', maxAttempts: 2, lookUp: false }]), { type: 'resume', maxAttempts: 2, lookUp: false }, T0);
  t.ok(twice.ok);
  if (twice.ok) t.match(twice.state.errorMessage, /handed to its provider 2 times \(the limit is 2\)/);
});

t.test('cancel asks the provider to stop only a job it holds under a known id', async (t) => {
  const cancelAtProvider = (commands: GenerationCommand[]) => {
    const decision = decide(drive(commands), { type: 'cancel', by: 'user' }, T0);
    return decision.ok ? decision.effects.filter((e) => e.type === 'cancel_at_provider') : 'refused';
  };
  t.same(cancelAtProvider(at.submitted), [{ type: 'cancel_at_provider', providerJobId: 'p1' }], 'submitted under p1');
  t.same(cancelAtProvider(at.running), [{ type: 'cancel_at_provider', providerJobId: 'p1' }], 'running under p1');
  t.same(cancelAtProvider([...at.submitted, { type: 'resume', maxAttempts: 3, lookUp: false }]), [], 'resubmitted after a restart, no id yet: nothing to stop');
  t.same(cancelAtProvider(at.reserved), [], 'reserved: not at the provider yet');
});

t.test('a job its provider can look up is followed after a restart, never handed over again', async (t) => {
  for (const status of ['submitted', 'running'] as const) {
    const before = drive(at[status]);
    const d = decide(before, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true }, T0 + 5);
    t.ok(d.ok, status);
    if (!d.ok) continue;
    t.same(d.effects, [{ type: 'follow_at_provider', providerJobId: 'p1' }], `${status}: followed under its id`);
    t.equal(d.state.attempts, before.attempts, 'no new attempt is counted');
    t.equal(d.state.providerJobId, 'p1', 'its id is kept');
    t.equal(d.state.status, status, 'its status stays');
    t.equal(d.state.timeline.at(-1)?.detail, 'followed at its provider after a restart');
  }
  // Reserved: the provider never accepted it (no id written): handed over as before.
  const reserved = decide(drive(at.reserved), { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true }, T0);
  t.ok(reserved.ok && reserved.effects.some((e) => e.type === 'submit_to_provider'), 'reserved: handed over');
  // Even past the attempts a followed job is not failed: following it costs no new run.
  let state = drive(at.running);
  state = { ...state, attempts: MAX_ATTEMPTS };
  const followed = decide(state, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true }, T0);
  t.ok(followed.ok && followed.state.status === 'running', 'past the attempts, still followed');
});

t.test('provider notes go into the timeline, bounded, without a change of state', async (t) => {
  const running = drive(at.running);
  const noted = decide(running, { type: 'note', detail: 'queue position 3' }, T0);
  t.ok(noted.ok);
  if (!noted.ok) return;
  t.same(noted.effects, [], 'no effect');
  t.same(noted.state.timeline.at(-1), { status: 'running', at: new Date(T0).toISOString(), detail: 'queue position 3' });
  t.notOk(decide(noted.state, { type: 'note', detail: 'queue position 3' }, T0).ok, 'the same note twice in a row is left out');
  let state = noted.state;
  for (let i = 0; i < 40; i++) {
    const d = decide(state, { type: 'note', detail: `line ${i}` }, T0);
    if (d.ok) state = d.state;
  }
  t.equal(state.timeline.filter((e) => e.status === 'running' && e.detail !== undefined).length, MAX_NOTES, `at most ${MAX_NOTES} notes per status`);
  // Before its hand-over a job may say what it waits for (an open breaker); still no note while queued.
  const waiting = decide(drive(at.reserved), { type: 'note', detail: 'waiting for d1: its circuit breaker is open' }, T0);
  t.ok(waiting.ok && waiting.state.status === 'reserved' && waiting.effects.length === 0, 'a reserved job takes a note, staying reserved');
  t.notOk(decide(drive(at.queued), { type: 'note', detail: 'x' }, T0).ok, 'no note while queued');
});

t.test('a reroute hands the job to another deployment: status kept, one more attempt, the old id dropped', async (t) => {
  const running = drive(at.running);
  const d = decide(
    running,
    { type: 'reroute', deploymentId: 'second', provider: 'replicate', detail: 'attempt on first failed: provider_unavailable: down; trying second' },
    T0,
  );
  t.ok(d.ok);
  if (!d.ok) return;
  t.same(d.effects, [{ type: 'submit_to_provider' }]);
  t.equal(d.state.status, 'running', 'the status never goes back');
  t.equal(d.state.attempts, running.attempts + 1);
  t.equal(d.state.providerJobId, null, "the failed attempt's id is not the new one");
  t.same([d.state.deploymentId, d.state.provider], ['second', 'replicate']);
  t.match(d.state.timeline.at(-1), { status: 'running', detail: /^attempt on first failed: provider_unavailable/ });
});

t.test('only a terminal state is settled; submitted, running and notes need nothing done', async (t) => {
  for (const status of GENERATION_STATUSES) {
    if (status === 'queued') continue;
    const state = drive(at[status], T0 + TIMEOUT);
    t.equal(state.completedAt !== null, isTerminal(status), `${status}: completed only when terminal`);
  }
  const steps: Array<[GenerationCommand[], GenerationCommand]> = [
    [at.reserved, { type: 'submitted', providerJobId: 'p1' }],
    [at.submitted, { type: 'started' }],
    [at.running, { type: 'submitted', providerJobId: 'p2' }],
    [at.running, { type: 'note', detail: 'queue position 1' }],
  ];
  for (const [before, command] of steps) {
    const d = decide(drive(before), command, T0);
    t.ok(d.ok, command.type);
    if (!d.ok) continue;
    t.same(d.effects, [], `${command.type} from ${d.state.status}: no effect`);
    t.equal(d.settle, undefined, `${command.type}: not settled`);
  }
  for (const [status, commands] of [
    ['reserved', at.reserved],
    ['resume', [...at.running, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true }]],
  ] as const) {
    const last = commands.at(-1)!;
    const d = decide(drive(commands.slice(0, -1)), last, T0);
    t.ok(d.ok && d.settle === undefined, `${status}: not settled`);
  }
  t.same(EVENT_OF, {
    succeeded: 'generation.completed',
    failed: 'generation.failed',
    cancelled: 'generation.cancelled',
    expired: 'generation.expired',
  });
});

t.test('resume of a job whose provider answers within its request: never handed over again when its call may have gone out', async (t) => {
  for (const status of ['reserved', 'submitted', 'running'] as const) {
    const before = drive(at[status]);
    // Its submitted rode unwritten (actors/generation/actor.ts, RIDE_MS): no provider job id was stored.
    const unwritten = { ...before, providerJobId: null };
    const d = decide(unwritten, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true, inRequest: true }, T0 + 7);
    t.ok(d.ok, `resume from ${status}`);
    if (!d.ok) continue;
    t.equal(d.state.status, 'failed', `from ${status}: failed, not run again`);
    t.equal(d.state.errorCode, 'provider_error');
    t.match(d.state.errorMessage, /whether it ran is not known/);
    t.same(d.effects, [], 'nothing handed to the provider');
    t.same(d.settle, { money: 'release', heldSlot: true }, 'its credits released');
  }
  // With its provider job id written, it is followed there (the adapter says what became of it).
  const followed = decide(drive(at.running), { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true, inRequest: true }, T0);
  t.ok(followed.ok && followed.effects[0]?.type === 'follow_at_provider', 'a written provider job id is followed');
  // A provider whose jobs live in this process (local: no lookUp) hands the job over again.
  const local = decide({ ...drive(at.running), providerJobId: null }, { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false, inRequest: true }, T0);
  t.ok(local.ok && local.effects[0]?.type === 'submit_to_provider', 'the local provider runs it again');
});

t.test('every applied decision hands back a new row and leaves the one it was given as it was', async (t) => {
  // The generation actor stamps the row `decide` returns (updatedAt) instead of copying it again.
  const commands: GenerationCommand[] = [
    { type: 'reserve' },
    { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: true },
    { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false },
    { type: 'resume', maxAttempts: MAX_ATTEMPTS, lookUp: false, inRequest: true },
    { type: 'note', detail: 'position 3' },
    { type: 'reroute', deploymentId: 'second', provider: 'local', detail: 'moved' },
    { type: 'submitted', providerJobId: 'p2' },
    { type: 'started' },
    { type: 'succeed', outputs: { outputAssetIds: [], textOutput: 'hi' } },
    { type: 'fail', errorCode: 'provider_error', errorMessage: 'boom' },
    { type: 'cancel', by: 'user' },
    { type: 'expire' },
  ];
  let applied = 0;
  for (const [status, path] of Object.entries(at)) {
    for (const command of commands) {
      const state = drive(path, T0 + TIMEOUT);
      const before = JSON.stringify(state);
      const decision = decide(state, command, T0 + TIMEOUT);
      t.equal(JSON.stringify(state), before, `${command.type} from ${status}: the row given is unchanged`);
      if (!decision.ok) continue;
      applied++;
      t.not(decision.state, state, `${command.type} from ${status}: a new row`);
    }
  }
  t.ok(applied >= 20, `${applied} applied decisions checked`);
});
