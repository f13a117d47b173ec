/**
 * Mutants that survive the tests on purpose, by id (as `npm run mutate` prints it), each with why: the
 * mutant behaves as the original does (equivalent), or what it changes cannot be seen from outside.
 */
export const EXPLAINED: Record<string, string> = {
  'actors/workspace/account.ts planReservation.fromCredits: 0 → 1 in `fromCredits = 0`':
    'equivalent: every branch assigns fromCredits before it is read',
  'actors/workspace/account.ts checkWalletSettings: 0 → 1 in `settings.monthlySpendCapCents ?? 0`':
    'equivalent: the stand-in for "no cap" is only range-checked, and 1 passes every check 0 passes',
  'client/src/webhooks.ts verifyWebhook: <= → < in `eq <= 0`':
    'equivalent: a part with an empty name ("=x") is named neither t nor v1, so it is ignored either way',
  'client/src/webhooks.ts verifyWebhook.body: condition → true in `typeof rawBody === \'string\'`':
    'equivalent: Buffer.from ignores the encoding for a Buffer or Uint8Array and copies the same bytes; the original only avoids the copy',
  'actors/generation/state.ts decide.move: condition → true in `detail`':
    'equivalent where it can be seen: the entry gains `detail: undefined`, which JSON (the stored and the served timeline) leaves out',
  'runtime/egress.ts checkUrlSyntax: condition → false in `parsed.hostname === \'\'`':
    'equivalent: the WHATWG URL parser refuses an http or https URL without a host, so an empty hostname never reaches this check',
  'runtime/egress.ts checkUrlSyntax: false → true in `ok: false` #4':
    'equivalent: the same unreachable branch (an http or https URL always has a host)',
};
