/**
 * Mutation testing with StrykerJS (`npm run mutation`; README.md, Mutation testing): the pure modules, and the
 * fast unit and decider tests that should notice a change to them. Never a test that boots the service: a
 * mutant runs each test file that covers it in a process of its own, and a booting file costs seconds each time.
 */

/** The test files Stryker runs, each covering the modules below it imports. Add a store's tests here with the store. */
export const TEST_FILES = [
  'test/actors/generation-machine.test.ts',
  'test/actors/generation-decisions.test.ts',
  'test/actors/webhook-machine.test.ts',
  'test/actors/webhook-attempt-record.test.ts',
  'test/actors/workspace-account.test.ts',
  'test/actors/workspace-decide.test.ts',
  'test/actors/workspace-decide-payments.test.ts',
  'test/actors/workspace-pricing.test.ts',
  'test/actors/catalog.test.ts',
  'test/money/account.test.ts',
  'test/money/capture-part.test.ts',
  'test/money/pure.test.ts',
  'test/money/period.test.ts',
  'test/unit/budgets.test.ts',
  'test/unit/ledger-words.test.ts',
  'test/unit/token-pricing.test.ts',
  'test/unit/chat-token-bound.test.ts',
  'test/unit/routing.test.ts',
  'test/unit/job-needs.test.ts',
  'test/unit/catalog-file.test.ts',
  'test/unit/key-limits.test.ts',
  'test/unit/price-explained.test.ts',
  'test/unit/plans.test.ts',
  'test/catalog/params-validator.test.ts',
  'test/docs/catalog-fields.test.ts',
  'test/identity/login-attempt.test.ts',
  'test/identity/attempt-store.test.ts',
  // The stores, on an in-memory PGlite of their own (a second or two to open, no service).
  'test/persistence/money-store.test.ts',
  'test/persistence/creation-store.test.ts',
  'test/persistence/workspace-store.test.ts',
  'test/persistence/webhook-store.test.ts',
  'test/persistence/access-store.test.ts',
];

/** Where test/stryker/bundle.mjs writes each test file bundled, inside Stryker's sandbox. */
export const BUNDLE_DIR = '.stryker-bundles';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: [
    'domain/**/*.ts',
    // The deciders: state machines and money as pure functions.
    'actors/generation/machine.ts',
    'actors/webhook/machine.ts',
    'actors/workspace/decide-*.ts',
    'actors/workspace/pricing.ts',
    'actors/billing/period.ts',
    'http/auth/login-throttle.ts',
    'persistence/stores/**/*.ts',
  ],
  testRunner: 'tap',
  // Each test file bundled into one module (test/stryker/bundle.mjs): node runs it without the TypeScript loader.
  buildCommand: 'node test/stryker/bundle.mjs',
  tap: {
    testFiles: TEST_FILES.map((file) => `${BUNDLE_DIR}/${file.replace(/\.ts$/, '.mjs')}`),
    nodeArgs: [],
    forceBail: true,
  },
  coverageAnalysis: 'perTest',
  // Two cores, shared: one test process per core at most.
  concurrency: 2,
  timeoutMS: 20_000,
  dryRunTimeoutMinutes: 15,
  // Nothing the tests read: kept out of the sandbox Stryker copies the checkout into.
  ignorePatterns: ['.data', '.stryker-bundles', '.tap', 'dist', 'bench', 'client/dist', 'dashboard/dist', 'test/artifacts', '.scratch'],
  tempDirName: '.data/stryker-tmp',
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: '.data/mutation/mutation.html' },
  jsonReporter: { fileName: '.data/mutation/mutation.json' },
  incrementalFile: '.data/mutation/incremental.json',
  clearTextReporter: { allowEmojis: false, logTests: false, reportScoreTable: true },
  thresholds: { high: 90, low: 80, break: null },
};
