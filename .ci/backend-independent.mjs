#!/usr/bin/env node
// Prints, one per line, the test files whose result cannot depend on the back end: neither the file nor
// anything it reaches (its relative imports, dynamic imports and the .ts paths it names, such as a fixture
// it starts as a child process) reads TEST_DATABASE_URL or TEST_REDIS_URL, the only way the suite is
// pointed at PostgreSQL and Redis. CI runs these once, on the embedded defaults, and leaves them out of
// the PostgreSQL + Redis run, where they would only repeat the same work.
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const BACKEND = /\bTEST_(DATABASE|REDIS)_URL\b/;
const SPECIFIER = /(?:from\s+|import\s*\(\s*|['"`])(\.{0,2}\/?[\w@./-]+\.ts)['"`]/g;

/** Each file's text tested once: whether it names the back end's variables, and the files it names. */
const nodes = new Map();

function node(file) {
  let n = nodes.get(file);
  if (!n) {
    const text = fs.readFileSync(file, 'utf8');
    n = { backend: BACKEND.test(text), edges: edges(file, text) };
    nodes.set(file, n);
  }
  return n;
}

function edges(file, text) {
  const out = [];
  for (const m of text.matchAll(SPECIFIER)) {
    const spec = m[1];
    const target = spec.startsWith('.') ? path.resolve(path.dirname(file), spec) : path.resolve(root, spec);
    if (target.startsWith(root) && !target.includes('node_modules') && fs.existsSync(target)) out.push(target);
  }
  return out;
}

/** Whether `file` or anything it reaches names the back end's variables (breadth-first over what it names). */
function usesBackend(file) {
  const seen = new Set([file]);
  const queue = [file];
  while (queue.length > 0) {
    const n = node(queue.shift());
    if (n.backend) return true;
    for (const next of n.edges) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return false;
}

/** The test files (*.test.ts) under `dir`, absolute paths, fixtures and node_modules left out. */
export function testFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'fixtures' || e.name === 'node_modules' ? [] : testFiles(p);
    return e.name.endsWith('.test.ts') ? [p] : [];
  });
}

/** The test files (paths from the repository's root, sorted) whose result cannot depend on the back end. */
export function backendIndependent() {
  return testFiles(path.join(root, 'test'))
    .sort()
    .filter((file) => !usesBackend(file))
    .map((file) => path.relative(root, file));
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  for (const file of backendIndependent()) console.log(file);
}
