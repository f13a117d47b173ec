import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { ManualClock } from '../../runtime/clock.ts';
import { connectRedis } from '../../runtime/redis.ts';
import { createLogger } from '../../runtime/logger.ts';
import { Breakers, createBreakers, type BreakerSettingsInput, type JobOutcome } from '../../providers/routing/breaker-store.ts';
import { PROVIDER_ERROR_CODES } from '../../providers/adapter.ts';

const REDIS_URL = process.env.TEST_REDIS_URL;
const settings: BreakerSettingsInput = {
  defaults: { windowMs: 60_000, minCalls: 4, failureRatio: 0.5, cooldownMs: 1_000, maxCooldownMs: 4_000, probeTimeoutMs: 10_000 },
  deployments: { strict: { minCalls: 2, failureRatio: 1 } },
};
const ok: JobOutcome = { ok: true };
const down: JobOutcome = { ok: false, errorCode: PROVIDER_ERROR_CODES.unavailable };
const refused: JobOutcome = { ok: false, errorCode: PROVIDER_ERROR_CODES.contentPolicy };

type Make = (clock: ManualClock) => Promise<Breakers>;

/** A fresh key prefix per store, so runs and parallel files never share breakers. */
const prefix = () => `test:breakers:${randomBytes(6).toString('hex')}:`;

async function redisClient(t: Test) {
  const redis = await connectRedis(REDIS_URL!, createLogger('silent'));
  t.teardown(() => redis.close());
  return redis;
}

const backends: Array<[string, ((t: Test) => Make) | undefined]> = [
  ['memory', () => async (clock) => createBreakers({ prefix: prefix(), clock, settings })],
  ['redis', REDIS_URL ? (t) => async (clock) => createBreakers({ redis: await redisClient(t), prefix: prefix(), clock, settings }) : undefined],
];

async function recordAll(breakers: Breakers, deploymentId: string, outcomes: JobOutcome[]): Promise<void> {
  for (const outcome of outcomes) await breakers.record(deploymentId, outcome);
}

for (const [name, backend] of backends) {
  t.test(`${name} store: opens on the ratio once the window holds the minimum, not before`, { skip: !backend && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock();
    const breakers = await backend!(t)(clock);
    t.equal(breakers.kind, name);
    await recordAll(breakers, 'd1', [ok, down, down]);
    t.same(
      await breakers.read(['d1']),
      [{ deploymentId: 'd1', status: 'closed', calls: 3, failures: 2, failureRatio: 2 / 3, openUntil: null, cooldownMs: 0, probing: false }],
      'three calls: under the minimum of 4',
    );
    t.same(await breakers.admit('d1'), { allowed: true });
    await recordAll(breakers, 'd1', [refused, refused, refused]);
    t.equal((await breakers.read(['d1']))[0]!.calls, 3, 'refused prompts are not counted');
    await breakers.record('d1', down);
    const [open] = await breakers.read(['d1']);
    t.match(open, { status: 'open', calls: 0, openUntil: clock.now() + 1_000, cooldownMs: 1_000 });
    t.same(await breakers.admit('d1'), { allowed: false, status: 'open', retryAt: clock.now() + 1_000 });
    t.same(
      (await breakers.read(['other']))[0],
      { deploymentId: 'other', status: 'closed', calls: 0, failures: 0, failureRatio: 0, openUntil: null, cooldownMs: 0, probing: false },
      'deployments apart; one never seen reads closed',
    );
  });

  t.test(`${name} store: the window slides with the clock`, { skip: !backend && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock();
    const breakers = await backend!(t)(clock);
    await recordAll(breakers, 'd', [down, down, down]);
    clock.advance(60_000);
    t.equal((await breakers.read(['d']))[0]!.calls, 0, 'a minute later the window is empty');
    await breakers.record('d', down);
    t.equal((await breakers.read(['d']))[0]!.status, 'closed', 'the old failures no longer count toward the minimum');
    clock.advance(59_999);
    await recordAll(breakers, 'd', [ok, down, down]);
    t.equal((await breakers.read(['d']))[0]!.status, 'open', 'the failure of 59.999 s ago still counts: 3 of 4');
  });

  t.test(`${name} store: a 429's Retry-After opens for exactly that long`, { skip: !backend && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock();
    const breakers = await backend!(t)(clock);
    const start = clock.now();
    await breakers.record('d', { ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 2_500 });
    t.same(await breakers.admit('d'), { allowed: false, status: 'open', retryAt: start + 2_500 });
    t.same((await breakers.read(['d']))[0]!.opened, { at: start, calls: 1, failures: 1, reason: 'retry_after' }, 'what opened it is kept');
    clock.advance(1_000);
    await breakers.record('d', { ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 500 });
    t.equal((await breakers.read(['d']))[0]!.openUntil, start + 2_500, 'a shorter one does not shorten it');
    await breakers.record('d', { ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 3_000 });
    t.equal((await breakers.read(['d']))[0]!.openUntil, start + 4_000, 'a longer one extends it');
    clock.advance(2_999);
    t.equal((await breakers.admit('d')).allowed, false);
    clock.advance(1);
    t.match(await breakers.admit('d'), { allowed: true, ticket: String }, 'open no longer than asked');
  });

  t.test(`${name} store: half-open lets exactly one job through; its outcome decides`, { skip: !backend && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock();
    const breakers = await backend!(t)(clock);
    await recordAll(breakers, 'strict', [down, down]);
    t.equal((await breakers.read(['strict']))[0]!.status, 'open', "this deployment's own settings: 2 calls, all failed");
    clock.advance(1_000);
    t.equal((await breakers.read(['strict']))[0]!.status, 'half_open', 'past its cool-down it reads half-open');
    const admissions = await Promise.all(Array.from({ length: 8 }, () => breakers.admit('strict')));
    const granted = admissions.filter((a) => a.allowed);
    t.equal(granted.length, 1, 'one of eight concurrent callers');
    const ticket = (granted[0] as { ticket: string }).ticket;
    t.type(ticket, 'string');
    t.same(admissions.filter((a) => !a.allowed)[0], { allowed: false, status: 'half_open', retryAt: null });
    t.match((await breakers.read(['strict']))[0], { status: 'half_open', probing: true });
    await breakers.record('strict', ok);
    t.equal((await breakers.admit('strict')).allowed, false, 'a success without the ticket decides nothing');
    await breakers.record('strict', down, ticket);
    const [reopened] = await breakers.read(['strict']);
    t.match(reopened, { status: 'open', openUntil: clock.now() + 2_000, cooldownMs: 2_000 }, "the ticket's failure: open again, twice as long");
    clock.advance(2_000);
    const again = await breakers.admit('strict');
    t.ok(again.allowed);
    await breakers.record('strict', refused, (again as { ticket: string }).ticket);
    const next = await breakers.admit('strict');
    t.match(next, { allowed: true, ticket: String }, 'an input failure gave the ticket back');
    await breakers.record('strict', ok, (next as { ticket: string }).ticket);
    t.same(
      (await breakers.read(['strict']))[0],
      { deploymentId: 'strict', status: 'closed', calls: 0, failures: 0, failureRatio: 0, openUntil: null, cooldownMs: 0, probing: false },
      'closed and fresh',
    );
  });

  t.test(`${name} store: the cool-down doubles with each failed probe, up to its cap`, { skip: !backend && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock();
    const breakers = await backend!(t)(clock);
    await breakers.record('d', { ok: false, errorCode: PROVIDER_ERROR_CODES.authFailed });
    t.match((await breakers.read(['d']))[0]!.opened, { calls: 1, failures: 1, reason: 'at_once' }, 'a refused key opens at once, and says so');
    const cooldowns: number[] = [];
    for (let i = 0; i < 4; i++) {
      const [view] = await breakers.read(['d']);
      cooldowns.push(view!.cooldownMs);
      clock.advance(view!.openUntil! - clock.now());
      const admission = await breakers.admit('d');
      await breakers.record('d', { ok: false, errorCode: PROVIDER_ERROR_CODES.timeout }, (admission as { ticket: string }).ticket);
    }
    t.same(cooldowns, [1_000, 2_000, 4_000, 4_000], 'an auth failure opened it at once; then doubled and capped');
    t.match((await breakers.read(['d']))[0]!.opened, { calls: 1, failures: 1, reason: 'probe_failed' }, 'reopened by its failed probe');
  });

  t.test(`${name} store: a lost ticket goes to the next caller after probeTimeoutMs`, { skip: !backend && 'needs TEST_REDIS_URL' }, async (t) => {
    const clock = new ManualClock();
    const breakers = await backend!(t)(clock);
    await recordAll(breakers, 'strict', [down, down]);
    clock.advance(1_000);
    const lost = await breakers.admit('strict');
    t.ok(lost.allowed);
    clock.advance(9_999);
    t.equal((await breakers.admit('strict')).allowed, false);
    clock.advance(1);
    t.match((await breakers.read(['strict']))[0], { status: 'half_open', probing: false });
    const retaken = await breakers.admit('strict');
    t.ok(retaken.allowed);
    t.not((retaken as { ticket: string }).ticket, (lost as { ticket: string }).ticket);
    await breakers.record('strict', ok, (lost as { ticket: string }).ticket);
    t.equal((await breakers.read(['strict']))[0]!.status, 'half_open', 'the lapsed ticket decides nothing');
  });
}

t.test('two nodes on one Redis see one state and only one half-open ticket is granted', { skip: !REDIS_URL && 'needs TEST_REDIS_URL' }, async (t) => {
  const clock = new ManualClock();
  const shared = prefix();
  const [a, b] = [
    createBreakers({ redis: await redisClient(t), prefix: shared, clock, settings }),
    createBreakers({ redis: await redisClient(t), prefix: shared, clock, settings }),
  ];
  await Promise.all([a.record('d', ok), b.record('d', down), a.record('d', down)]);
  t.match((await b.read(['d']))[0], { calls: 3, failures: 2 }, "node B counts node A's outcomes");
  await a.record('d', ok);
  t.equal((await b.read(['d']))[0]!.status, 'closed');
  await b.record('d', down);
  t.equal((await a.read(['d']))[0]!.status, 'open', "B's failure opened it for A too");
  t.same(await a.admit('d'), { allowed: false, status: 'open', retryAt: clock.now() + 1_000 });
  clock.advance(1_000);
  for (let round = 0; round < 5; round++) {
    const admissions = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).admit('d')));
    const granted = admissions.filter((admission) => admission.allowed);
    t.equal(granted.length, 1, `round ${round}: one ticket among ten calls from two nodes`);
    const ticket = (granted[0] as { ticket: string }).ticket;
    // The probe fails (on whichever node ran it); the next round is after the doubled cool-down.
    await (round % 2 === 0 ? b : a).record('d', down, ticket);
    clock.advance((await a.read(['d']))[0]!.openUntil! - clock.now());
  }
});

t.test('the Redis store keeps its keys under the prefix, each with an expiry', { skip: !REDIS_URL && 'needs TEST_REDIS_URL' }, async (t) => {
  const clock = new ManualClock();
  const redis = await redisClient(t);
  const keyPrefix = prefix();
  const breakers = createBreakers({ redis, prefix: keyPrefix, clock, settings });
  await recordAll(breakers, 'd', [ok, down]);
  t.same((await redis.keys(`${keyPrefix}*`)).sort(), [`${keyPrefix}breaker:{d}:fail`, `${keyPrefix}breaker:{d}:ok`]);
  await recordAll(breakers, 'd', [down, down]);
  const keys = await redis.keys(`${keyPrefix}*`);
  t.same(keys, [`${keyPrefix}breaker:{d}`], 'opening drops the window; the state hash remains');
  t.ok((await redis.pTTL(keys[0]!)) > 0, 'with an expiry');
  clock.advance(1_000);
  const admission = await breakers.admit('d');
  await breakers.record('d', ok, (admission as { ticket: string }).ticket);
  t.same(await redis.keys(`${keyPrefix}*`), [], 'closed: nothing left to remember');
});

t.test('a store that fails never stops jobs: admit lets them through, record drops the outcome', async (t) => {
  const warnings: string[] = [];
  const logger = { warn: (_: unknown, message: string) => warnings.push(message), info: () => {} } as never;
  const broken = {
    kind: 'redis' as const,
    admit: async () => {
      throw new Error('connection lost');
    },
    record: async () => {
      throw new Error('connection lost');
    },
    read: async () => {
      throw new Error('connection lost');
    },
  };
  const breakers = new Breakers({ prefix: '', clock: new ManualClock(), logger }, broken);
  t.same(await breakers.admit('d'), { allowed: true });
  await breakers.record('d', down);
  t.equal(warnings.length, 2);
  await t.rejects(breakers.read(['d']), /connection lost/, 'a read says so (the endpoint answers 503)');
});

t.test("settings: each deployment's own over the defaults, a wrong one refused at construction", async (t) => {
  const breakers = createBreakers({ prefix: '', clock: new ManualClock(), settings });
  t.equal(breakers.settingsOf('strict').minCalls, 2);
  t.equal(breakers.settingsOf('strict').cooldownMs, 1_000, 'the rest from the defaults');
  t.equal(breakers.settingsOf('any').minCalls, 4);
  t.throws(() => createBreakers({ prefix: '', clock: new ManualClock(), settings: { deployments: { bad: { failureRatio: 2 } } } }), /failureRatio/);
  const byFunction = createBreakers({
    prefix: '',
    clock: new ManualClock(),
    settings: { deployments: (id) => (id === 'x' ? { windowMs: 5_000 } : undefined) },
  });
  t.equal(byFunction.settingsOf('x').windowMs, 5_000);
  t.equal(byFunction.settingsOf('y').windowMs, 60_000);
});
