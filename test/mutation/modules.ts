/**
 * What `npm run mutate` mutates, and the test files that must notice each mutant. The one place that
 * names the modules: when a module moves, fix its path here. Test files run fastest first, and a mutant's
 * run stops at the first file that fails, so slow integration files only run for what the fast ones miss.
 */
export interface MutatedModule {
  /** A group name for the report: money, signature, state machine, egress, auth. */
  area: string;
  /** The source file, from the repository's root. */
  file: string;
  /** The test files that should kill its mutants, fastest first. */
  tests: string[];
  /** Also turn string literals and template strings into empty strings (where the text itself is the behaviour). */
  strings?: boolean;
  /** Only mutate inside these functions, methods or classes (by name); the whole file when absent. */
  only?: string[];
}

export const MODULES: MutatedModule[] = [
  { area: 'money', file: 'actors/workspace/account.ts', tests: ['test/money/account.test.ts', 'test/money/pure.test.ts'] },
  { area: 'money', file: 'actors/billing/period.ts', tests: ['test/money/pure.test.ts', 'test/money/period.test.ts'] },
  { area: 'signature', file: 'actors/webhook/signature.ts', tests: ['test/webhooks/verify.test.ts', 'test/webhooks/signing.test.ts'], strings: true },
  { area: 'signature', file: 'actors/webhook/standard-signature.ts', tests: ['test/webhooks/signing.test.ts'], strings: true },
  { area: 'signature', file: 'actors/webhook/signing.ts', tests: ['test/webhooks/signing.test.ts', 'test/webhooks/verify.test.ts'], strings: true },
  { area: 'signature', file: 'client/src/webhooks.ts', tests: ['test/webhooks/verify.test.ts'] },
  { area: 'state machine', file: 'actors/generation/machine.ts', tests: ['test/actors/generation-machine.test.ts'] },
  { area: 'state machine', file: 'actors/webhook/machine.ts', tests: ['test/actors/webhook-machine.test.ts', 'test/actors/webhook-attempt-record.test.ts'] },
  // The guard's rules (which addresses, URLs and redirects pass), not the streaming, pooling and messages around them.
  {
    area: 'egress',
    file: 'runtime/egress.ts',
    tests: ['test/runtime/egress.test.ts', 'test/runtime/egress-rules.test.ts'],
    only: ['checkUrlSyntax', 'isPublicAddress', 'parseAddress', 'isPublicIPv4', 'embeddedIPv4', 'rfc6052IPv4', 'isLoopbackAddress', 'policyOf', 'isRedirect'],
  },
  { area: 'auth', file: 'runtime/lru.ts', tests: ['test/unit/lru.test.ts', 'test/identity/key-cache.test.ts'] },
  {
    area: 'auth',
    file: 'http/auth/limiter.ts',
    tests: ['test/identity/limiter.test.ts', 'test/unit/rate-window.test.ts', 'test/identity/login-attempt.test.ts'],
  },
  {
    area: 'auth',
    file: 'http/auth/attempt-store.ts',
    tests: ['test/identity/attempt-store.test.ts', 'test/identity/attempt-store-sweep.test.ts', 'test/identity/login-attempt.test.ts'],
  },
  { area: 'auth', file: 'http/auth/login-throttle.ts', tests: ['test/identity/attempt-store.test.ts', 'test/identity/login-attempt.test.ts'] },
];
