/**
 * Stryker's build step (stryker.config.mjs, buildCommand), run inside its sandbox on the instrumented sources:
 * bundles each test file it runs into one ES module, packages left to node_modules. node then runs a test with
 * no TypeScript loader, which otherwise resolves and compiles the modules of tap and of the service at every
 * start: about a third of the CPU per test process, and Stryker starts one per mutant and test file.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { BUNDLE_DIR, TEST_FILES } from '../../stryker.config.mjs';

/** Each module keeps its own import.meta (the files it finds from where it sits), not the bundle's. */
const ownImportMeta = {
  name: 'own-import-meta',
  setup(b) {
    b.onLoad({ filter: /\.[cm]?ts$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = await readFile(args.path, 'utf8');
      const contents = source
        .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll('import.meta.dirname', JSON.stringify(path.dirname(args.path)))
        .replaceAll('import.meta.filename', JSON.stringify(args.path));
      return { contents, loader: 'ts' };
    });
  },
};

await build({
  entryPoints: TEST_FILES,
  outbase: '.',
  outdir: BUNDLE_DIR,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  packages: 'external',
  format: 'esm',
  platform: 'node',
  target: 'node20',
  logLevel: 'warning',
  plugins: [ownImportMeta],
});
