import { createHash } from 'node:crypto';
import type { RedisClient } from '../../runtime/redis.ts';
import {
  viewFrom,
  type Admission,
  type BreakerSettings,
  type BreakerStatus,
  type BreakerView,
  type Opening,
  type Transition,
  type Verdict,
} from './breaker.ts';
import type { BreakerBackend } from './breaker-backend.ts';

/*
 * The rules of breaker.ts in Lua, one script per operation, so each is atomic in Redis: two nodes recording at
 * once both count, and of two nodes asking a half-open breaker at once exactly one gets the ticket.
 * Per deployment: a hash (status, openUntil, cooldownMs, ticket, ticketAt; absent = closed with nothing to
 * remember) and two sorted sets of the window's outcomes, successes and failures, scored by their time.
 * Time is the calling node's clock, passed in (as the pure machine takes it), so nodes' clocks should agree
 * (NTP) to well within a cool-down.
 */

/** Whole milliseconds as Redis stores them (Lua's default number format would print 13 digits as an exponent past 1e14). */
const HELPERS = `local function int(x) return string.format('%d', x) end
local function keep(key, ms) redis.call('PEXPIRE', key, int(ms)) end
`;

/**
 * KEYS: hash. ARGV: now, probeTimeoutMs, ticket, ttlMs.
 * Returns {allowed 0|1, ticket or '', refused status or '', retryAt or '', transition from or ''}.
 */
const ADMIT = `${HELPERS}
local now = tonumber(ARGV[1])
local state = redis.call('HMGET', KEYS[1], 'status', 'openUntil', 'ticket', 'ticketAt')
local status = state[1] or 'closed'
if status == 'closed' then return {1, '', '', '', ''} end
if status == 'open' then
  local untilAt = tonumber(state[2])
  if untilAt and now < untilAt then return {0, '', 'open', int(untilAt), ''} end
  redis.call('HSET', KEYS[1], 'status', 'half_open', 'ticket', ARGV[3], 'ticketAt', int(now))
  redis.call('HDEL', KEYS[1], 'openUntil')
  keep(KEYS[1], tonumber(ARGV[4]))
  return {1, ARGV[3], '', '', 'open'}
end
local ticketAt = tonumber(state[4])
if state[3] and ticketAt and now - ticketAt < tonumber(ARGV[2]) then return {0, '', 'half_open', '', ''} end
redis.call('HSET', KEYS[1], 'ticket', ARGV[3], 'ticketAt', int(now))
keep(KEYS[1], tonumber(ARGV[4]))
return {1, ARGV[3], '', '', ''}`;

/**
 * KEYS: hash, successes, failures. ARGV: now, kind (s success, n neutral, f failure), retryAfterMs or '',
 * atOnce 1|0, ticket or '', eventId, windowMs, minCalls, failureRatio, cooldownMs, maxCooldownMs, ttlMs.
 * Returns {from, to} when the state changed, else {}.
 */
const RECORD = `${HELPERS}
local now = tonumber(ARGV[1])
local kind = ARGV[2]
local retryAfter = tonumber(ARGV[3])
local windowMs, minCalls, ratio = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local baseCooldown, maxCooldown, ttl = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local state = redis.call('HMGET', KEYS[1], 'status', 'openUntil', 'cooldownMs', 'ticket')
local status = state[1] or 'closed'
local cooldown = tonumber(state[3]) or 0
local function open(from, untilAt, cd, reason, calls, failures)
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('HSET', KEYS[1], 'status', 'open', 'openUntil', int(untilAt), 'cooldownMs', int(cd),
    'openedAt', int(now), 'openedCalls', int(calls), 'openedFailures', int(failures), 'openedReason', reason)
  redis.call('HDEL', KEYS[1], 'ticket', 'ticketAt')
  keep(KEYS[1], untilAt - now + ttl)
  return {from, 'open'}
end
if status == 'closed' then
  if kind == 'n' then return {} end
  local since = now - windowMs
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', int(since))
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', int(since))
  local window = KEYS[2]
  if kind == 'f' then window = KEYS[3] end
  redis.call('ZADD', window, int(now), ARGV[6])
  keep(window, windowMs + 60000)
  if kind == 'f' then
    local failures = redis.call('ZCARD', KEYS[3])
    local calls = failures + redis.call('ZCARD', KEYS[2])
    if retryAfter then return open('closed', now + retryAfter, cooldown, 'retry_after', calls, failures) end
    if ARGV[4] == '1' then return open('closed', now + baseCooldown, baseCooldown, 'at_once', calls, failures) end
    if calls >= minCalls and failures / calls >= ratio then return open('closed', now + baseCooldown, baseCooldown, 'failures', calls, failures) end
  end
  return {}
end
if status == 'open' then
  local untilAt = tonumber(state[2])
  if kind == 'f' and retryAfter and (not untilAt or now + retryAfter > untilAt) then
    redis.call('HSET', KEYS[1], 'openUntil', int(now + retryAfter))
    keep(KEYS[1], retryAfter + ttl)
  end
  return {}
end
if ARGV[5] ~= '' and state[4] == ARGV[5] then
  if kind == 's' then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
    return {'half_open', 'closed'}
  end
  if kind == 'n' then
    redis.call('HDEL', KEYS[1], 'ticket', 'ticketAt')
    return {}
  end
  local cd = baseCooldown
  if cooldown > 0 then cd = math.min(cooldown * 2, maxCooldown) end
  return open('half_open', now + (retryAfter or cd), cd, 'probe_failed', 1, 1)
end
if kind == 'f' and retryAfter then return open('half_open', now + retryAfter, cooldown, 'retry_after', 1, 1) end
return {}`;

/**
 * KEYS: hash, successes, failures of each deployment in turn. ARGV: now, then each deployment's windowMs.
 * Returns per deployment {status, openUntil, cooldownMs, ticketAt, successes, failures, openedAt, openedCalls,
 * openedFailures, openedReason}, '' for absent.
 */
const READ = `${HELPERS}
local now = tonumber(ARGV[1])
local out = {}
for i = 0, #KEYS / 3 - 1 do
  local state = redis.call('HMGET', KEYS[i * 3 + 1], 'status', 'openUntil', 'cooldownMs', 'ticketAt', 'openedAt', 'openedCalls', 'openedFailures', 'openedReason')
  local since = '(' .. int(now - tonumber(ARGV[i + 2]))
  out[i + 1] = {
    state[1] or 'closed', state[2] or '', state[3] or '', state[4] or '',
    redis.call('ZCOUNT', KEYS[i * 3 + 2], since, '+inf'), redis.call('ZCOUNT', KEYS[i * 3 + 3], since, '+inf'),
    state[5] or '', state[6] or '', state[7] or '', state[8] or '',
  }
end
return out`;

/** Keys of one deployment in one Redis hash slot (the braces), should the Redis be a cluster one day. */
function keysOf(prefix: string, deploymentId: string): [string, string, string] {
  const base = `${prefix}breaker:{${deploymentId}}`;
  return [base, `${base}:ok`, `${base}:fail`];
}

/** How long a breaker's hash outlives its last change: past any cool-down, so an idle one is forgotten in time. */
function ttlOf(settings: BreakerSettings): number {
  return settings.maxCooldownMs + settings.probeTimeoutMs + 24 * 60 * 60_000;
}

export class RedisBreakerBackend implements BreakerBackend {
  readonly kind = 'redis';
  private readonly shas = new Map<string, string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  async admit(deploymentId: string, now: number, settings: BreakerSettings, ticket: string): Promise<{ admission: Admission; transition?: Transition }> {
    const [hash] = keysOf(this.prefix, deploymentId);
    const reply = (await this.run(ADMIT, [hash], [String(now), String(settings.probeTimeoutMs), ticket, String(ttlOf(settings))])) as string[] | number[];
    const [allowed, granted, refused, retryAt, from] = reply.map(String) as [string, string, string, string, string];
    const transition: Transition | undefined = from ? { from: from as BreakerStatus, to: 'half_open' } : undefined;
    if (allowed === '1') return { admission: granted ? { allowed: true, ticket: granted } : { allowed: true }, transition };
    return { admission: { allowed: false, status: refused as 'open' | 'half_open', retryAt: retryAt ? Number(retryAt) : null } };
  }

  async record(
    deploymentId: string,
    verdict: Verdict,
    now: number,
    settings: BreakerSettings,
    ticket: string | undefined,
    eventId: string,
  ): Promise<Transition | undefined> {
    const kind = verdict.kind === 'success' ? 's' : verdict.kind === 'neutral' ? 'n' : 'f';
    const failure = verdict.kind === 'failure' ? verdict : undefined;
    const reply = (await this.run(RECORD, keysOf(this.prefix, deploymentId), [
      String(now),
      kind,
      failure?.retryAfterMs === undefined ? '' : String(failure.retryAfterMs),
      failure?.atOnce ? '1' : '0',
      ticket ?? '',
      eventId,
      String(settings.windowMs),
      String(settings.minCalls),
      String(settings.failureRatio),
      String(settings.cooldownMs),
      String(settings.maxCooldownMs),
      String(ttlOf(settings)),
    ])) as string[];
    return reply.length === 2 ? { from: reply[0] as BreakerStatus, to: reply[1] as BreakerStatus } : undefined;
  }

  async read(deploymentIds: readonly string[], now: number, settingsOf: (deploymentId: string) => BreakerSettings): Promise<BreakerView[]> {
    if (deploymentIds.length === 0) return [];
    const settings = deploymentIds.map(settingsOf);
    const reply = (await this.run(
      READ,
      deploymentIds.flatMap((id) => keysOf(this.prefix, id)),
      [String(now), ...settings.map((s) => String(s.windowMs))],
    )) as unknown[][];
    return reply.map((row, i) => {
      const [status, openUntil, cooldownMs, ticketAt, successes, failures, openedAt, openedCalls, openedFailures, openedReason] = row.map(String) as [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
      ];
      const calls = Number(successes) + Number(failures);
      return viewFrom(
        {
          status: status as BreakerStatus,
          openUntil: openUntil ? Number(openUntil) : null,
          cooldownMs: cooldownMs ? Number(cooldownMs) : 0,
          ticketAt: ticketAt ? Number(ticketAt) : null,
          ...(openedAt
            ? { opened: { at: Number(openedAt), calls: Number(openedCalls), failures: Number(openedFailures), reason: openedReason as Opening['reason'] } }
            : {}),
        },
        calls,
        Number(failures),
        now,
        settings[i]!,
      );
    });
  }

  /** EVALSHA, loading the script on NOSCRIPT (a restarted or flushed Redis), as the rate limiter does. */
  private async run(script: string, keys: string[], args: string[]): Promise<unknown> {
    let sha = this.shas.get(script);
    if (sha === undefined) this.shas.set(script, (sha = createHash('sha1').update(script).digest('hex')));
    try {
      return await this.redis.evalSha(sha, { keys, arguments: args });
    } catch (error) {
      if (!/NOSCRIPT/.test((error as Error).message)) throw error;
      return await this.redis.eval(script, { keys, arguments: args });
    }
  }
}
