/** The test files (paths from the repository's root, sorted) whose result cannot depend on the back end. */
export function backendIndependent(): string[];
