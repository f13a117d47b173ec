import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { eventually } from '../helpers/eventually.ts';

/** A plan of a test catalog: generous enough that no limit of it is what a test meets, unless it says so. */
export function plan(id: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id,
    name: id[0]!.toUpperCase() + id.slice(1),
    monthlyPriceCents: 0,
    monthlyCredits: 1_000_000,
    centsPerCredit: 5,
    concurrentJobs: 64,
    unfinishedJobs: 100_000,
    storageBytes: 1e9,
    maxFileBytes: 1e7,
    requestsPerMinute: 10_000_000,
    ...extra,
  };
}

/** A text model on the built-in local provider, with its one deployment named after it. */
export function textModel(id: string, price: Record<string, unknown>, plans: string[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id,
    name: id,
    mode: 'text_to_text',
    maker: 'acme',
    description: `${id}, run by the local provider.`,
    price,
    plans,
    parameters: { prompt: { required: true }, systemPrompt: {}, maxTokens: { maximum: 4096, default: 64 } },
    sample: { prompt: 'Say hello.', note: 'A test model.' },
    deployments: [{ id: `${id.replace(/\W/g, '-')}-local`, provider: 'local' }],
    ...extra,
  };
}

export interface CatalogFile {
  file: string;
  /** Replaces the file as a ConfigMap swap does: the new content written beside it, then renamed over it. */
  swap(document: unknown): void;
  /** Replaces the file with text as it is (an invalid file, say), by the same rename. */
  swapText(text: string): void;
}

/** A catalog file (JSON) in a folder of its own, removed when the test ends. */
export function catalogFile(t: Test, document: unknown): CatalogFile {
  const dir = mkdtempSync(path.join(tmpdir(), 'gs-catalog-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'catalog.json');
  let n = 0;
  const swapText = (text: string) => {
    // A dot-name, as the kubelet's staging files: the service's watch ignores it until the rename.
    const staged = path.join(dir, `..staged-${n++}`);
    writeFileSync(staged, text);
    renameSync(staged, file);
  };
  writeFileSync(file, JSON.stringify(document));
  return { file, swap: (document) => swapText(JSON.stringify(document)), swapText };
}

/** The value of one sample of a Prometheus exposition (summed over the series whose labels include `labels`); 0 when none. */
export async function metricValue(metricsUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) found[pair[1]!] = pair[2]!;
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) sum += Number(match[3]);
  }
  return sum;
}

/** The catalog version a node serves (GET /health/ready). */
export async function servedVersion(url: string): Promise<string | undefined> {
  const response = await fetch(`${url}/health/ready`).catch(() => undefined);
  if (response?.status !== 200) return undefined;
  return ((await response.json()) as { catalog?: { version?: string } }).catalog?.version;
}

/** Polls `check` until it returns something other than undefined (a bound against hanging only). */
export function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000, everyMs = 10): Promise<T> {
  return eventually(check, { what, timeoutMs, everyMs }) as Promise<T>;
}
