import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { AllocationTally } from './gc-trace.ts';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const orphanGuard = pathToFileURL(path.join(repoRoot, 'bench', 'lib', 'orphan-guard.ts')).href;

/** A server the bench started; its output is kept (last lines) to explain a failure. */
export interface ChildServer {
  name: string;
  child: ChildProcess;
  pid: number;
  url: string;
  /** Lines printed so far (stdout and stderr, last 200), `--trace-gc` lines aside. */
  output: string[];
  /** Bytes its V8 heap allocated so far, from its `--trace-gc` lines; undefined without them (bench/lib/gc-trace.ts). */
  allocatedBytes(): number | undefined;
  exited: Promise<number | null>;
  hasExited(): boolean;
}

const children = new Set<ChildServer>();

/** A port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The V8 flags the service runs with, as `npm start` and the container image give them (package.json, deploy/container/Dockerfile):
 * 32 MiB semi-spaces for the young generation, where V8's default 16 MiB had the `peers` bench spend 28 % of the service's
 * CPU in garbage collection.
 */
export const SERVICE_NODE_FLAGS = ['--max-semi-space-size=32'];

/** Starts `node --import tsx [nodeArgs] <script>` from the repository root, in its own process (nodeArgs may --import .ts files). */
export function startNodeServer(name: string, script: string, port: number, env: Record<string, string>, nodeArgs: string[] = []): ChildServer {
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_CPU_PROF_DIR ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF_DIR] : []),
      '--import',
      'tsx',
      '--import',
      orphanGuard,
      ...(script === 'app/main.ts' ? SERVICE_NODE_FLAGS : []),
      ...nodeArgs,
      script,
    ],
    {
      cwd: repoRoot,
      env: { ...process.env, ...env, HOST: '127.0.0.1', PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  if (child.pid === undefined) throw new Error(`could not start ${name}`);
  const output: string[] = [];
  const allocation = new AllocationTally();
  const keep = (line: string) => {
    if (line.trim() === '' || allocation.add(line)) return;
    output.push(line);
    if (output.length > 200) output.shift();
  };
  // Whole lines of each stream (a chunk may end inside one).
  for (const stream of [child.stdout!, child.stderr!]) {
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) keep(line);
    });
    stream.on('end', () => keep(partial));
  }
  let exited = false;
  const server: ChildServer = {
    name,
    child,
    pid: child.pid,
    url: `http://127.0.0.1:${port}`,
    output,
    allocatedBytes: () => allocation.bytes,
    exited: new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        exited = true;
        children.delete(server);
        resolve(code ?? (signal ? 128 : null));
      }),
    ),
    hasExited: () => exited,
  };
  children.add(server);
  return server;
}

/** Polls `url` until it answers 200; fails early if the process exits, and after `timeoutMs`. */
export async function waitUntilReady(server: ChildServer, pathname: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (server.hasExited()) throw new Error(`${server.name} exited before it was ready:\n${tail(server)}`);
    try {
      const response = await fetch(`${server.url}${pathname}`, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.status === 200) return;
      last = `HTTP ${response.status}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${server.name} was not ready after ${timeoutMs} ms (${last}):\n${tail(server)}`);
}

export function tail(server: ChildServer, lines = 30): string {
  return (
    server.output
      .slice(-lines)
      .map((line) => `  | ${line}`)
      .join('\n') || '  | (no output)'
  );
}

/** SIGTERM, then SIGKILL after `graceMs` if it is still there. */
export async function stopServer(server: ChildServer, graceMs = 5_000): Promise<void> {
  if (server.hasExited()) return;
  server.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), graceMs);
  });
  const outcome = await Promise.race([server.exited, late]);
  clearTimeout(timer);
  if (outcome === 'late' && !server.hasExited()) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
}

export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((server) => stopServer(server)));
}

/** Last resort, synchronous (for process 'exit'): SIGKILL whatever is still running. */
export function killAllNow(): void {
  for (const server of children) {
    try {
      server.child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU seconds (user + system) a process has used so far; undefined where /proc is not available. */
export function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at ") ".
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
    return (utime + stime) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** CPU seconds of each of these processes now (those gone or unreadable left out). */
export function processesCpuSeconds(pids: number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    const s = processCpuSeconds(pid);
    if (s !== undefined) out.set(pid, s);
  }
  return out;
}

/** CPU used between two readings of processesCpuSeconds; a process that appeared in between counts from its start (its whole life was in between). */
export function cpuBetween(before: Map<number, number> | undefined, after: Map<number, number> | undefined): number | undefined {
  if (!before || !after) return undefined;
  let sum = 0;
  for (const [pid, s] of after) sum += s - (before.get(pid) ?? 0);
  return sum;
}

/** Busy CPU seconds of the whole machine (all cores, every process); undefined where /proc is not available. */
export function systemBusyCpuSeconds(): number | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('cpu '));
    if (!line) return undefined;
    // user nice system idle iowait irq softirq steal (guest is already counted in user)
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    const busy = [user, nice, system, irq, softirq, steal].reduce<number>((sum, v) => sum + (v ?? 0), 0);
    return busy / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** Resident set size of a process in bytes (VmRSS); undefined where /proc is not available. */
export function processRssBytes(pid: number): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}
