/**
 * Sums a sampling heap profile that kept collected objects (bench/lib/allocation-probe.ts) by the function
 * that allocated and by our folder or the dependency that holds it, per job:
 *
 *   node --import tsx bench/lib/allocation-report.ts <file.heapprofile> <jobs>
 *
 * "Self" is what the function itself allocated; "by folder" charges each sample to the innermost frame of
 * ours on its stack (a dependency's allocation made for our code is charged to our caller), or to the
 * dependency when no frame of ours is on it.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  callFrame: CallFrame;
  selfSize: number;
  children: ProfileNode[];
}

const ROOT = new URL('../../', import.meta.url).pathname;

function where(frame: CallFrame): string {
  const url = frame.url.replace(/^file:\/\//, '');
  const dep = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dep) return `dep:${dep[1]}`;
  if (url.startsWith(ROOT)) return url.slice(ROOT.length);
  return url === '' ? '(V8 or native)' : url.startsWith('node:') ? url : `node:${url}`;
}

function ours(frame: CallFrame): string | undefined {
  const place = where(frame);
  return place.startsWith('dep:') || place.startsWith('node:') || place.startsWith('(') ? undefined : place;
}

export function report(profile: { head: ProfileNode }, jobs: number, top = 40): string {
  const bySelf = new Map<string, number>();
  const byOurs = new Map<string, number>();
  let total = 0;
  const walk = (node: ProfileNode, stack: CallFrame[]) => {
    const frames = [...stack, node.callFrame];
    if (node.selfSize > 0) {
      total += node.selfSize;
      const self = `${node.callFrame.functionName || '(anonymous)'} ${where(node.callFrame)}:${node.callFrame.lineNumber + 1}`;
      bySelf.set(self, (bySelf.get(self) ?? 0) + node.selfSize);
      const mine = [...frames].reverse().find((frame) => ours(frame));
      const place = mine ? `${ours(mine)} ${mine.functionName || '(anonymous)'}` : where(node.callFrame);
      byOurs.set(place, (byOurs.get(place) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, frames);
  };
  walk(profile.head, []);
  const kb = (bytes: number) => `${(bytes / jobs / 1024).toFixed(2)} KB`;
  const table = (title: string, map: Map<string, number>) =>
    [
      `${title}:`,
      ...[...map]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([name, bytes]) => `${kb(bytes).padStart(10)} ${((bytes / total) * 100).toFixed(1).padStart(5)} %  ${name}`),
    ].join('\n');
  return [`${kb(total)} per job sampled over ${jobs} jobs`, table('by the innermost frame of ours', byOurs), table('by function', bySelf)].join('\n\n');
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const [file, jobs] = process.argv.slice(2);
  if (!file || !jobs) throw new Error('usage: allocation-report.ts <file.heapprofile> <jobs>');
  console.log(report(JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode }, Number(jobs)));
}
