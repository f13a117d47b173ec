// Module hooks of the tests' loader (register.mjs). A `.ts` file is compiled by esbuild on its own to an ES
// module with an inline source map (stack traces name the TypeScript lines), and the output is kept on disk
// under the hash of its source, so a test process reads most of its modules compiled already.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { transformSync, version } from 'esbuild';

// test/fixtures/child-bundle.ts bundles a child's script with the same compiler options (its TSCONFIG): keep them alike.
const OPTIONS = {
  loader: 'ts',
  format: 'esm',
  target: 'node20',
  sourcemap: 'inline',
  tsconfigRaw: { compilerOptions: { target: 'ES2022', verbatimModuleSyntax: true, useDefineForClassFields: true } },
};
const CACHE = fileURLToPath(new URL('../../node_modules/.cache/gs-test-loader/', import.meta.url));
// A change of esbuild or of the options above is a new cache.
const SALT = `${version}\0${JSON.stringify(OPTIONS)}\0`;
mkdirSync(CACHE, { recursive: true });

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts') || url.includes('/node_modules/')) return nextLoad(url, context);
  const file = fileURLToPath(url);
  const source = readFileSync(file, 'utf8');
  // The file's path is in the key too: the inline source map names it.
  const cached = `${CACHE}${createHash('sha1').update(SALT).update(file).update('\0').update(source).digest('hex')}.js`;
  let code;
  try {
    code = readFileSync(cached, 'utf8');
  } catch {
    code = transformSync(source, { ...OPTIONS, sourcefile: file }).code;
    // Written aside, then renamed: test processes running side by side never read half a file.
    const aside = `${cached}.${process.pid}.tmp`;
    writeFileSync(aside, code);
    renameSync(aside, cached);
  }
  return { format: 'module', source: code, shortCircuit: true };
}
