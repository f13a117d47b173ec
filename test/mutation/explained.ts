/**
 * Mutants that survive the tests on purpose, by id (as `npm run mutate` prints it), each with why: the
 * mutant behaves as the original does (equivalent), or what it changes cannot be seen from outside.
 */
export const EXPLAINED: Record<string, string> = {
  'actors/workspace/account.ts planReservation.fromCredits: 0 → 1 in `fromCredits = 0`': 'equivalent: every branch assigns fromCredits before it is read',
  'actors/workspace/account.ts checkWalletSettings: 0 → 1 in `settings.monthlySpendCapCents ?? 0`':
    'equivalent: the stand-in for "no cap" is only range-checked, and 1 passes every check 0 passes',
  'client/src/webhooks.ts verifyWebhook: <= → < in `eq <= 0`':
    'equivalent: a part with an empty name ("=x") is named neither t nor v1, so it is ignored either way',
  "client/src/webhooks.ts verifyWebhook.body: condition → true in `typeof rawBody === 'string'`":
    'equivalent: Buffer.from ignores the encoding for a Buffer or Uint8Array and copies the same bytes; the original only avoids the copy',
  'actors/generation/machine.ts decide.move: condition → true in `detail`':
    'equivalent where it can be seen: the entry gains `detail: undefined`, which JSON (the stored and the served timeline) leaves out',
  "runtime/egress.ts checkUrlSyntax: condition → false in `parsed.hostname === ''`":
    'equivalent: the WHATWG URL parser refuses an http or https URL without a host, so an empty hostname never reaches this check',
  'runtime/egress.ts checkUrlSyntax: false → true in `ok: false` #4': 'equivalent: the same unreachable branch (an http or https URL always has a host)',
  'runtime/egress.ts embeddedIPv4: 64 → 65 in `[48, 56, 64, 96]`':
    'equivalent: bits 64-71 (the u octet) are skipped, so reading from bit 65 starts at bit 72 exactly as reading from bit 64 does',
  'runtime/lru.ts Lru.tick: 0 → 1 in `private tick = 0;`': 'equivalent: only differences of ticks are compared, and starting one higher shifts them all alike',
  'runtime/lru.ts Lru.get: condition → true in `this.tick - entry.touched >= this.max >> 1`':
    'acceptable: the mutant moves every hit, an exact LRU; leaving a recent entry where it is only spares the Map work on hot reads, and the tests check the guarantee both keep (the max/2 most recently used are never evicted)',
  'runtime/lru.ts Lru.get: - → + in `this.tick - entry.touched`':
    'acceptable: as the condition made true, the sum is almost always past max/2, so nearly every hit moves: an exact LRU, which keeps the same guarantee',
  'http/auth/login-throttle.ts waitUntil: 40 → 41 in `Math.min(doublings, 40)`':
    'equivalent: the cap only keeps 2 ** doublings finite; 1 s × 2^40 and 2^41 are both far past the 15-minute maximum the wait is held to',
  'http/auth/login-throttle.ts decideAttempt: > → >= in `record.count > 0`':
    'equivalent: a stored record always counts at least one attempt (it is stored counted), so count >= 0 and count > 0 agree on every record that exists',
  'http/auth/login-throttle.ts beginLoginAttempt: + → - in `now + 1_000`':
    'equivalent: Retry-After is at least 1 s, so a retry time a second ahead and one a second behind both answer Retry-After: 1',
  'runtime/lru.ts Lru.get: 1 → 2 in `this.max >> 1`':
    'acceptable: hits then move once an entry is max/4 old instead of max/2, nearer an exact LRU; the guarantee the tests check (the max/2 most recently used are kept) holds either way',
};
