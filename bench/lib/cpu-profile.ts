import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { repoRoot } from './processes.ts';

/** A V8 CPU profile as `--cpu-prof` writes it (the fields read here). */
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; scriptId?: number | string } }>;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileShare {
  category: string;
  ms: number;
  /** Of the process's busy time (everything but idle). */
  percent: number;
}

/**
 * The main thread's profile file `--cpu-prof --cpu-prof-dir dir` wrote for process `pid`, if any: its name is
 * CPU.<date>.<time>.<pid>.<thread>.<sequence>.cpuprofile, thread 0 the main one (tsx's loader thread writes another).
 */
export async function profileOf(dir: string, pid: number): Promise<string | undefined> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const name = names.find((n) => {
    const parts = n.split('.');
    return n.endsWith('.cpuprofile') && parts[3] === String(pid) && parts[4] === '0';
  });
  return name === undefined ? undefined : path.join(dir, name);
}

/** Start-up work (loading and compiling modules), kept apart from the work of the run. */
export const START_UP = 'start-up: loading and compiling modules (node:internal/modules, tsx, source maps)';

/** Where a function's code lives, coarsely: a package, a folder of the service, a part of node, or V8's pseudo-frames. */
export function categoryOf(functionName: string, url: string, scriptId: number | string = 1): string {
  if (url === '') {
    if (functionName === '(garbage collector)') return 'garbage collection';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(program)') return 'V8 and native code (program)';
    if (functionName === 'runMicrotasks') return 'promise jobs (runMicrotasks)';
    if (Number(scriptId) !== 0) return 'generated code (ajv validators and other new Function code)';
    return 'native built-ins (I/O writes, JSON, crypto, fs)';
  }
  if (url.startsWith('wasm://')) return 'WebAssembly';
  if (url.startsWith('node:')) {
    if (/^node:internal\/(modules|deps\/cjs-module-lexer|source_map|bootstrap)/.test(url)) return START_UP;
    if (url.includes('async_hooks') || url === 'node:internal/async_local_storage') return 'node async_hooks (AsyncLocalStorage, promise hooks)';
    if (/^node:(internal\/)?(net|stream|streams|http|dns|tcp)/.test(url)) return 'node sockets and streams';
    return 'node core, other';
  }
  const file = url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url;
  const modules = file.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = file.slice(modules + '/node_modules/'.length).split('/');
    if (rest[0] === 'tsx') return START_UP;
    return `package ${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  const relative = path.relative(repoRoot, file);
  if (!relative.startsWith('..')) {
    const parts = relative.split(path.sep);
    return `service ${parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  return 'other';
}

/**
 * Self time by category over the whole profile, largest first. Idle and start-up are left out of the
 * percentages and the list (start-up's milliseconds are returned apart).
 */
export async function summariseProfile(file: string): Promise<{ busyMs: number; startUpMs: number; shares: ProfileShare[] }> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const categoryById = new Map(profile.nodes.map((n) => [n.id, categoryOf(n.callFrame.functionName, n.callFrame.url, n.callFrame.scriptId)]));
  const micros = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const category = categoryById.get(profile.samples[i]!) ?? 'other';
    // A sample's time is the delta to the next sample.
    const delta = profile.timeDeltas[i + 1] ?? 0;
    micros.set(category, (micros.get(category) ?? 0) + delta);
  }
  micros.delete('idle');
  const startUp = micros.get(START_UP) ?? 0;
  micros.delete(START_UP);
  const busy = [...micros.values()].reduce((a, b) => a + b, 0);
  const shares = [...micros.entries()]
    .map(([category, us]) => ({ category, ms: Math.round(us / 1000), percent: busy === 0 ? 0 : Math.round((us / busy) * 1000) / 10 }))
    .sort((a, b) => b.ms - a.ms);
  return { busyMs: Math.round(busy / 1000), startUpMs: Math.round(startUp / 1000), shares };
}
