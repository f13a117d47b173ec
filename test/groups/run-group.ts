import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import t, { type Test } from 'tap';
import { backendIndependent, testFiles } from '../../.ci/backend-independent.mjs';

/**
 * Several test files in one process (docs/testing.md, "Test files in groups"). Every test file imports the
 * root `t` of tap; here each file runs inside a subtest of its own, named by its path, and what the file
 * asks of the root (its tests, teardowns, hooks, timeout, assertions) goes to that subtest while it runs. A
 * file's teardowns so run when its tests end, its timeout is its own, and its output is the same subtest
 * tap's runner prints for a file. What the group saves is the process: node's start, the import of the
 * service and its dependencies (some 3 s of CPU each), and the compiler's warm-up.
 *
 * A file that cannot share a process is run alone: it is named in package.json's `tap.include`, which the
 * groups read and leave out.
 */

/** What a test file calls on the root: its structure, and any assertion at its top level. */
const ASSERTIONS_AND_CONTROL = [
  'test',
  'skip',
  'todo',
  'only',
  'teardown',
  'before',
  'after',
  'beforeEach',
  'afterEach',
  'setTimeout',
  'plan',
  'comment',
  'pass',
  'fail',
  'ok',
  'notOk',
  'equal',
  'not',
  'same',
  'notSame',
  'strictSame',
  'strictNotSame',
  'match',
  'notMatch',
  'matchOnly',
  'matchStrict',
  'has',
  'hasStrict',
  'notHas',
  'type',
  'error',
  'throws',
  'doesNotThrow',
  'rejects',
  'resolves',
  'resolveMatch',
  'emits',
  'mockImport',
  'mockRequire',
  'capture',
  'intercept',
];

/** The root's members a test file may call, each sent to the file's own subtest while it runs. */
const FORWARDED = ASSERTIONS_AND_CONTROL.filter((name) => typeof (t as unknown as Record<string, unknown>)[name] === 'function');

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The per-file bound of tap's runner (package.json `tap.timeout`), kept for each file of a group. */
const FILE_TIMEOUT_MS = 180_000;

/** Every test file a group may run: under test/, named *.test.ts, outside fixtures, minus those run alone. */
export function groupedFiles(): string[] {
  const alone = new Set(aloneFiles());
  return testFiles(path.join(ROOT, 'test'))
    .map((file) => path.relative(ROOT, file))
    .filter((file) => !alone.has(file))
    .sort();
}

/** The test files package.json's `tap.include` names one by one: each in a process of its own. */
export function aloneFiles(): string[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { tap: { include: string[] } };
  return manifest.tap.include.filter((entry) => entry.endsWith('.test.ts') && !entry.includes('*'));
}

/**
 * Where each file's measured seconds are kept (record-durations.ts writes them from a run's tap output), one
 * file per back end: a file's time differs by more than the database (the cluster tests skip on PGlite, the
 * production install runs only on PostgreSQL), so each half is balanced by its own figures.
 */
export function durationsFile(backend: 'pglite' | 'postgres' = process.env.TEST_DATABASE_URL ? 'postgres' : 'pglite'): string {
  return path.join(ROOT, backend === 'postgres' ? 'test/groups/durations-postgres.json' : 'test/groups/durations.json');
}

/** Each test file's seconds in a quiet run of this back end's half (durationsFile); {} when there is none. */
export function measuredSeconds(backend?: 'pglite' | 'postgres'): Record<string, number> {
  try {
    return JSON.parse(fs.readFileSync(durationsFile(backend), 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/**
 * The files of group `index` of `count`, the groups balanced by the files' measured seconds: longest first,
 * each to the group with the least time so far (the longest-processing-time rule: no group ends more than
 * its longest file after another). A file not measured yet counts as the median of those that were. Within a
 * group the files run in sorted order. Deterministic: the same files and seconds give the same groups.
 */
export function filesOfGroup(index: number, count: number, files = groupedFiles(), seconds = measuredSeconds()): string[] {
  return balancedGroups(files, count, seconds)[index] ?? [];
}

/** Every group's files (see filesOfGroup). */
export function balancedGroups(files: string[], count: number, seconds: Record<string, number>): string[][] {
  const known = files
    .map((file) => seconds[file])
    .filter((s): s is number => typeof s === 'number' && s >= 0)
    .sort((a, b) => a - b);
  const median = known.length > 0 ? known[Math.floor(known.length / 2)]! : 1;
  const cost = (file: string) => {
    const s = seconds[file];
    return typeof s === 'number' && s >= 0 ? s : median;
  };
  const order = [...files].sort((a, b) => cost(b) - cost(a) || (a < b ? -1 : a > b ? 1 : 0));
  const groups = Array.from({ length: count }, () => ({ files: [] as string[], total: 0 }));
  for (const file of order) {
    let least = groups[0]!;
    for (const group of groups) if (group.total < least.total) least = group;
    least.files.push(file);
    least.total += cost(file);
  }
  return groups.map((group) => group.files.sort());
}

/** An entry file's name: group-NN.ts. */
const GROUP_ENTRY = /^group-(\d+)\.ts$/;

/** The group an entry file is (test/groups/group-NN.ts: the NN-th, counting from 1, of as many as there are). */
export function runThisGroup(entryUrl: string): Promise<void> {
  const count = groupCount();
  const number = Number(GROUP_ENTRY.exec(path.basename(fileURLToPath(entryUrl)))?.[1]);
  return runGroup(number - 1, count);
}

/**
 * How many groups there are: the entry files test/groups/group-01.ts … group-NN.ts, numbered without a gap
 * (a gap would leave the files of the missing number in no group: refused).
 */
export function groupCount(): number {
  const numbers = fs
    .readdirSync(path.join(ROOT, 'test/groups'))
    .flatMap((name) => {
      const match = GROUP_ENTRY.exec(name);
      return match ? [Number(match[1])] : [];
    })
    .sort((a, b) => a - b);
  numbers.forEach((number, i) => {
    if (number !== i + 1) throw new Error(`test/groups: group-${String(i + 1).padStart(2, '0')}.ts is missing (the groups are numbered from 01 without a gap)`);
  });
  return numbers.length;
}

/**
 * Runs group `index` of `count` in this process, one file after another (TEST_GROUP_FILES, comma-separated
 * paths, runs those instead: to find which neighbour a file cannot share a process with). With TEST_SKIP_BACKEND_INDEPENDENT
 * set (CI's PostgreSQL and Redis half), files whose result cannot depend on the back end are left out, as
 * the runner's --exclude leaves out such files run alone.
 */
export async function runGroup(index: number, count: number): Promise<void> {
  // With TEST_SKIP_BACKEND_INDEPENDENT the files left out are left out before the groups are balanced, so
  // that the groups of that half are even too.
  const independent = new Set(process.env.TEST_SKIP_BACKEND_INDEPENDENT ? backendIndependent() : []);
  const runsHere = (file: string) => !independent.has(file);
  const files = process.env.TEST_GROUP_FILES
    ? process.env.TEST_GROUP_FILES.split(',').filter(runsHere)
    : filesOfGroup(index, count, groupedFiles().filter(runsHere));
  if (files.length === 0) {
    t.plan(0, 'no file of this group runs on this back end');
    return;
  }
  // The group's bound, a backstop: each file's own, for every file (a file's subtest has its own bound, which
  // is what ends a hung file). A file that asks for a longer bound of its own adds it (runFile).
  const rootSetTimeout = t.setTimeout.bind(t);
  let budget = FILE_TIMEOUT_MS * files.length;
  rootSetTimeout(budget);
  const extendBy = (ms: number) => {
    budget += ms;
    rootSetTimeout(budget);
  };
  // The root's own `test`, taken before any file's forwarding replaces it (a subtest may start at once).
  const rootTest = t.test.bind(t);
  let ticks = process.env.TEST_GROUP_CPU ? cpuTicks() : undefined;
  for (const file of files) {
    rootTest(file, { timeout: FILE_TIMEOUT_MS }, (ft) => runFile(ft, file, extendBy));
    if (ticks) {
      rootTest(`cpu of ${file}`, async (ct) => {
        const now = cpuTicks();
        ct.comment(`cpu ${((now.own - ticks!.own) / 100).toFixed(1)} s, its children's ${((now.children - ticks!.children) / 100).toFixed(1)} s`);
        ticks = now;
        ct.pass();
      });
    }
    if (process.env.TEST_GROUP_MEMORY) {
      rootTest(`memory after ${file}`, async (mt) => {
        (globalThis as { gc?: () => void }).gc?.();
        const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
        const mb = (bytes: number) => `${Math.round(bytes / 1e6)} MB`;
        mt.comment(`rss ${mb(rss)}, heap ${mb(heapUsed)}, external ${mb(external)}, arrayBuffers ${mb(arrayBuffers)}`);
        mt.pass();
      });
    }
  }
}

/**
 * This process's CPU and its ended children's, in clock ticks (a hundredth of a second), from /proc/self/stat
 * (Linux): with TEST_GROUP_CPU set, each file's share is printed after it, its children's included (a kill -9
 * test's service processes). `TEST_GROUP_CPU=1 npx tap test/groups/group-08.ts`.
 */
function cpuTicks(): { own: number; children: number } {
  const fields = fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  // After the command's name: state is the first field, utime the 12th, stime, cutime, cstime the next three.
  const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number) as [number, number, number, number];
  return { own: utime + stime, children: cutime + cstime };
}

async function runFile(ft: Test, file: string, extendBy: (ms: number) => void): Promise<void> {
  const root = t as unknown as Record<string, unknown>;
  for (const name of FORWARDED) {
    Object.defineProperty(root, name, {
      configurable: true,
      writable: true,
      value: (...args: unknown[]) => {
        // The file's bound is its subtest's; the group's grows by as much.
        if (name === 'setTimeout' && typeof args[0] === 'number') extendBy(args[0]);
        return (ft as unknown as Record<string, (...a: unknown[]) => unknown>)[name]!(...args);
      },
    });
  }
  try {
    await import(pathToFileURL(path.join(ROOT, file)).href);
  } catch (error) {
    // As a file that throws while loading fails in a process of its own.
    ft.fail(`${file} failed to load`, { error });
  }
  // The file's subtest ends once the tests it queued have run; the forwarding stays until then (a test may
  // reach the root later: sharedTestServer's teardown, a helper handed the root), and is replaced by the
  // next file's when it starts.
}
