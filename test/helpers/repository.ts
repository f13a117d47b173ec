import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository's root, where the sources are: also when the tests run compiled from `.build/`
 * (test/compile.ts), whose files other than the compiled ones are links back here. Tests that walk the
 * tree (imports, folders, docs) walk this one.
 */
export const REPOSITORY = path.dirname(fs.realpathSync(fileURLToPath(new URL('../../package.json', import.meta.url))));
