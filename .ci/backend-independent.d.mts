/** The test files (paths from the repository's root, sorted) whose result cannot depend on the back end. */
export function backendIndependent(): string[];
/** The test files (*.test.ts) under `dir`, absolute paths, fixtures and node_modules left out. */
export function testFiles(dir: string): string[];
