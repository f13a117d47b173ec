/**
 * Mutants that survive the tests on purpose, by id (as `npm run mutate` prints it), each with why: the
 * mutant behaves as the original does (equivalent), or what it changes is not worth a test.
 */
export const EXPLAINED: Record<string, string> = {
};
