import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { repoRoot } from './processes.ts';

/** A V8 CPU profile as `--cpu-prof` writes it (the fields read here). */
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string } }>;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileShare {
  category: string;
  ms: number;
  /** Of the process's busy time (everything but idle). */
  percent: number;
}

/** The profile file `--cpu-prof --cpu-prof-dir dir` wrote for process `pid` (its name holds the pid), if any. */
export async function profileOf(dir: string, pid: number): Promise<string | undefined> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const name = names.find((n) => n.endsWith('.cpuprofile') && n.split('.').includes(String(pid)));
  return name === undefined ? undefined : path.join(dir, name);
}

/** Where a function's code lives, coarsely: a package, a folder of the service, node's own code, or V8's pseudo-frames. */
export function categoryOf(functionName: string, url: string): string {
  if (url === '') {
    if (functionName === '(garbage collector)') return 'garbage collection';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(program)') return 'V8 and native code (program)';
    return `native: ${functionName || '(anonymous)'}`;
  }
  if (url.startsWith('node:')) return 'node core (node:*)';
  const file = url.startsWith('file://') ? decodeURIComponent(new URL(url).pathname) : url;
  const modules = file.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = file.slice(modules + '/node_modules/'.length).split('/');
    return `package ${rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  const relative = path.relative(repoRoot, file);
  if (!relative.startsWith('..')) {
    const parts = relative.split(path.sep);
    return `service ${parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  return 'other';
}

/** Self time by category over the whole profile, largest first; idle is left out of the percentages and the list. */
export async function summariseProfile(file: string): Promise<{ busyMs: number; shares: ProfileShare[] }> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const categoryById = new Map(profile.nodes.map((n) => [n.id, categoryOf(n.callFrame.functionName, n.callFrame.url)]));
  const micros = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const category = categoryById.get(profile.samples[i]!) ?? 'other';
    // A sample's time is the delta to the next sample.
    const delta = profile.timeDeltas[i + 1] ?? 0;
    micros.set(category, (micros.get(category) ?? 0) + delta);
  }
  micros.delete('idle');
  const busy = [...micros.values()].reduce((a, b) => a + b, 0);
  const shares = [...micros.entries()]
    .map(([category, us]) => ({ category, ms: Math.round(us / 1000), percent: busy === 0 ? 0 : Math.round((us / busy) * 1000) / 10 }))
    .sort((a, b) => b.ms - a.ms);
  return { busyMs: Math.round(busy / 1000), shares };
}
