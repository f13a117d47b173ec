/**
 * Mutation testing (`npm run mutate`, outside CI and outside `npm test`): applies each mutant of the
 * modules in modules.ts to its source file, runs that module's test files on PGlite, restores the file,
 * and reports which mutants the tests killed. A survivor is either killed by a new test or explained in
 * explained.ts.
 *
 *   npm run mutate                     every module
 *   npm run mutate -- --area auth      one area (or --file <part of a path>)
 *   npm run mutate -- --survivors      only the last run's survivors and mutants it did not have (.data/mutation/last.json)
 *   npm run mutate -- --list           the mutants, without running anything
 *   npm run mutate -- --report         the last run's report again (after explaining survivors, say)
 *   npm run mutate -- --jobs 2         two modules at once (never two whose tests load each other's file)
 *
 * The original of the file being mutated is kept in .data/mutation/backup/ until it is restored, and put
 * back on exit, on Ctrl-C and at the next start should this process have been killed outright.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, copyFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { MODULES, type MutatedModule } from './modules.ts';
import { applyMutant, mutantsOf, type Mutant } from './mutants.ts';
import { EXPLAINED } from './explained.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const workDir = path.join(root, '.data/mutation');
const backupDir = path.join(workDir, 'backup');
const lastRun = path.join(workDir, 'last.json');

const { values: args } = parseArgs({
  options: {
    area: { type: 'string' },
    file: { type: 'string' },
    survivors: { type: 'boolean' },
    list: { type: 'boolean' },
    jobs: { type: 'string' },
    report: { type: 'boolean' },
  },
});

type Outcome = 'killed' | 'timeout' | 'survived';
interface Result {
  id: string;
  file: string;
  area: string;
  line: number;
  operator: string;
  outcome: Outcome;
  by?: string;
}

// ---- keeping the sources whole ----

const backupOf = (file: string) => path.join(backupDir, file.replaceAll('/', '__'));
const mutatedFiles = new Set<string>();
const children = new Set<ChildProcess>();

function restore(file: string): void {
  if (!mutatedFiles.has(file)) return;
  copyFileSync(backupOf(file), path.join(root, file));
  rmSync(backupOf(file));
  mutatedFiles.delete(file);
}

function restoreAll(): void {
  for (const file of [...mutatedFiles]) restore(file);
}

/** A backup left by a run that was killed outright: its file is still mutated, so put the original back. */
function restoreLeftovers(): void {
  if (!existsSync(backupDir)) return;
  for (const name of readdirSync(backupDir)) {
    const file = name.replaceAll('__', '/');
    copyFileSync(path.join(backupDir, name), path.join(root, file));
    rmSync(path.join(backupDir, name));
    console.log(`restored ${file} from the backup of an interrupted run`);
  }
}

function stop(child: ChildProcess): void {
  if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

const stopAll = () => {
  for (const child of children) stop(child);
};
process.on('exit', () => {
  stopAll();
  restoreAll();
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    stopAll();
    restoreAll();
    process.exit(130);
  });
}
process.on('uncaughtException', (error) => {
  stopAll();
  restoreAll();
  console.error(error);
  process.exit(1);
});

function withMutant<T>(mutant: Mutant, original: string, run: () => Promise<T>): Promise<T> {
  mkdirSync(backupDir, { recursive: true });
  writeFileSync(backupOf(mutant.file), original);
  mutatedFiles.add(mutant.file);
  writeFileSync(path.join(root, mutant.file), applyMutant(original, mutant));
  return run().finally(() => restore(mutant.file));
}

/** The repository files a test file loads, following relative imports (what a mutant elsewhere could change under it). */
function closureOf(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file) || !existsSync(path.join(root, file))) return seen;
  seen.add(file);
  const text = readFileSync(path.join(root, file), 'utf8');
  for (const [, spec] of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
    closureOf(path.relative(root, path.resolve(path.dirname(path.join(root, file)), spec!)), seen);
  }
  return seen;
}

// ---- running tests ----

/** Runs one test file on PGlite; whether it passed, or 'timeout'. */
function runTest(file: string, timeoutMs: number, log?: string): Promise<boolean | 'timeout'> {
  // The project's per-file timeout (package.json "tap"), which a file run by node alone would not get.
  const env: NodeJS.ProcessEnv = { ...process.env, TAP_TIMEOUT: '180' };
  delete env.TEST_DATABASE_URL;
  delete env.TEST_REDIS_URL;
  return new Promise((resolve) => {
    const out = log === undefined ? 'ignore' : openSync(log, 'w');
    const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: root, env, stdio: ['ignore', out, out], detached: true });
    children.add(child);
    const timer = setTimeout(() => {
      stop(child);
      resolve('timeout');
    }, timeoutMs);
    child.on('exit', (code) => {
      children.delete(child);
      clearTimeout(timer);
      resolve(code === 0);
    });
  });
}

/** One run at a time: a second would take the first one's mutated file for a leftover and restore it under it. */
function lock(): void {
  const file = path.join(workDir, 'lock');
  if (existsSync(file)) {
    const pid = Number(readFileSync(file, 'utf8'));
    let alive = false;
    try {
      process.kill(pid, 0);
      alive = true;
    } catch {
      /* gone */
    }
    if (alive && pid !== process.pid) throw new Error(`another run (pid ${pid}) is under way`);
  }
  mkdirSync(workDir, { recursive: true });
  writeFileSync(file, String(process.pid));
  process.on('exit', () => rmSync(file, { force: true }));
}

async function main(): Promise<void> {
  if (args.report) return report(JSON.parse(readFileSync(lastRun, 'utf8')).results);
  if (!args.list) {
    lock();
    restoreLeftovers();
  }
  const previous: Result[] = args.survivors && existsSync(lastRun) ? JSON.parse(readFileSync(lastRun, 'utf8')).results : [];
  const rerun = new Set(previous.filter((r) => r.outcome === 'survived').map((r) => r.id));
  const known = new Set(previous.map((r) => r.id));
  const modules = MODULES.filter((m) => (!args.area || m.area === args.area) && (!args.file || m.file.includes(args.file)));
  const plan: Array<{ module: MutatedModule; original: string; mutants: Mutant[] }> = modules.map((module) => {
    const original = readFileSync(path.join(root, module.file), 'utf8');
    const mutants = mutantsOf(module, original).filter((m) => !args.survivors || rerun.has(m.id) || !known.has(m.id));
    return { module, original, mutants };
  });
  if (args.list) {
    for (const { mutants } of plan) for (const m of mutants) console.log(`${m.file}:${m.line} ${m.id}`);
    console.log(`${plan.reduce((n, p) => n + p.mutants.length, 0)} mutants`);
    return;
  }

  // Every test file must pass on the sources as they are; its time sets its timeout under a mutant.
  const timeouts = new Map<string, number>();
  for (const file of new Set(plan.filter((p) => p.mutants.length > 0).flatMap((p) => p.module.tests))) {
    const log = path.join(workDir, `${path.basename(file)}.log`);
    mkdirSync(workDir, { recursive: true });
    const started = Date.now();
    const passed = await runTest(file, 600_000, log);
    const took = Date.now() - started;
    if (passed !== true) throw new Error(`${file} fails without any mutant (its output: ${path.relative(root, log)}): fix it first`);
    timeouts.set(file, Math.max(20_000, 3 * took + 10_000));
    console.log(`baseline ${file}: passed in ${(took / 1000).toFixed(1)} s`);
  }

  // Modules are mutated side by side (--jobs) only when none's tests load another's file.
  const closures = new Map(plan.map(({ module }) => [module.file, new Set(module.tests.flatMap((test) => [...closureOf(test)]))]));
  const clashes = (a: MutatedModule, b: MutatedModule) => closures.get(a.file)!.has(b.file) || closures.get(b.file)!.has(a.file);
  const results: Result[] = [];
  const waiting = plan.filter((p) => p.mutants.length > 0);
  const running = new Set<MutatedModule>();
  const jobs = Math.max(1, Number(args.jobs ?? 1));
  const runModule = async ({ module, original, mutants }: (typeof plan)[number]) => {
    for (const mutant of mutants) {
      const result = await withMutant(mutant, original, async () => {
        for (const test of module.tests) {
          const passed = await runTest(test, timeouts.get(test)!);
          if (passed === 'timeout') return { outcome: 'timeout' as const, by: test };
          if (!passed) return { outcome: 'killed' as const, by: test };
        }
        return { outcome: 'survived' as const };
      });
      results.push({ id: mutant.id, file: mutant.file, area: mutant.area, line: mutant.line, operator: mutant.operator, ...result });
      const mark = result.outcome === 'survived' ? (EXPLAINED[mutant.id] ? 'EXPLAINED' : 'SURVIVED') : result.outcome;
      console.log(`${mark.padEnd(9)} ${mutant.file}:${mutant.line} ${mutant.id}${result.by ? `  [${path.basename(result.by)}]` : ''}`);
      save(previous, results);
    }
    if (readFileSync(path.join(root, module.file), 'utf8') !== original) throw new Error(`${module.file} was not restored`);
  };
  await new Promise<void>((resolve, reject) => {
    const next = () => {
      if (waiting.length === 0 && running.size === 0) return resolve();
      while (running.size < jobs) {
        const i = waiting.findIndex((p) => [...running].every((other) => !clashes(p.module, other)));
        if (i < 0) return;
        const [item] = waiting.splice(i, 1);
        running.add(item!.module);
        runModule(item!).then(() => {
          running.delete(item!.module);
          next();
        }, reject);
      }
    };
    next();
  });
  report(save(previous, results));
}

/** Writes the results (over the last run's, with --survivors) to last.json; returns them. */
function save(previous: Result[], results: Result[]): Result[] {
  const fresh = new Map(results.map((r) => [r.id, r]));
  const all = args.survivors ? [...previous.map((r) => fresh.get(r.id) ?? r), ...results.filter((r) => !previous.some((p) => p.id === r.id))] : results;
  mkdirSync(workDir, { recursive: true });
  writeFileSync(lastRun, JSON.stringify({ at: new Date().toISOString(), results: all }, null, 2));
  return all;
}

function report(results: Result[]): void {
  const score = (rs: Result[]) => {
    const killed = rs.filter((r) => r.outcome !== 'survived').length;
    const explained = rs.filter((r) => r.outcome === 'survived' && EXPLAINED[r.id]).length;
    const counted = rs.length - explained;
    return (
      `${killed}/${rs.length} killed (${((100 * killed) / Math.max(1, rs.length)).toFixed(1)} %), ${explained} explained survivors, ` +
      `score without them ${((100 * killed) / Math.max(1, counted)).toFixed(1)} %`
    );
  };
  console.log('\nby area:');
  for (const area of [...new Set(results.map((r) => r.area))]) console.log(`  ${area.padEnd(14)} ${score(results.filter((r) => r.area === area))}`);
  console.log(`  ${'all'.padEnd(14)} ${score(results)}`);
  const unexplained = results.filter((r) => r.outcome === 'survived' && !EXPLAINED[r.id]);
  if (unexplained.length > 0) {
    console.log(`\n${unexplained.length} survivors neither killed nor explained (test/mutation/explained.ts):`);
    for (const r of unexplained) console.log(`  ${r.file}:${r.line} ${r.id}`);
    process.exitCode = 1;
  }
}

await main();
