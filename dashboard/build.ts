import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/**
 * Builds the dashboard (Preact, bundled by esbuild) into dashboard/dist: index.html and content-hashed
 * files under _app/. Run at install (npm's `prepare`) and by `npm run build:dashboard`; the service serves
 * what it finds there (http/dashboard.ts).
 */
const HERE = path.dirname(fileURLToPath(import.meta.url));
export const DASHBOARD_DIST = path.join(HERE, 'dist');

export async function buildDashboard(outDir = DASHBOARD_DIST): Promise<{ files: string[] }> {
  const result = await build({
    entryPoints: [path.join(HERE, 'src/main.tsx'), path.join(HERE, 'src/styles.css')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2022'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    write: false,
    outdir: path.join(outDir, '_app'),
    entryNames: '[name]-[hash]',
    legalComments: 'none',
    logLevel: 'warning',
  });
  // Built beside the old output, then swapped in, so a running service never sees half a build.
  const staging = `${outDir}.tmp-${process.pid}`;
  await fs.rm(staging, { recursive: true, force: true });
  await fs.mkdir(path.join(staging, '_app'), { recursive: true });
  const names: string[] = [];
  for (const file of result.outputFiles) {
    const name = path.basename(file.path);
    names.push(`_app/${name}`);
    await fs.writeFile(path.join(staging, '_app', name), file.contents);
  }
  const script = names.find((name) => name.endsWith('.js'));
  const style = names.find((name) => name.endsWith('.css'));
  if (!script || !style) throw new Error('the dashboard build made no script or no stylesheet');
  const html =
    '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>Generation Service</title>\n' +
    `<link rel="stylesheet" href="/${style}">\n<script type="module" src="/${script}"></script>\n</head>\n` +
    '<body>\n<div id="app"></div>\n<noscript>The dashboard needs JavaScript. The API is at <a href="/v1">/v1</a>.</noscript>\n</body>\n</html>\n';
  await fs.writeFile(path.join(staging, 'index.html'), html);
  await fs.rm(outDir, { recursive: true, force: true });
  await fs.rename(staging, outDir);
  return { files: ['index.html', ...names] };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const { files } = await buildDashboard();
  console.log(`dashboard built in ${Date.now() - started} ms: ${files.join(', ')}`);
}
