import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { request } from 'undici';
import type { LoadSummary, Scenario } from '../lib/types.ts';
import { signUp } from '../lib/accounts.ts';
import { measuredSummary } from '../lib/types.ts';

const FILE_BYTES = 1024 * 1024;
const WORKERS = 4;

/**
 * 1 MiB files through the local blob store (signed PUT, then signed GET of the same bytes) against writing
 * (flushed, as the store does) and reading the same bytes with plain node:fs in the same run. Work goes in
 * batches: the JSON calls around the transfers (upload URLs, completion, download URLs, deletes) run between
 * the timed phases, so only the bytes' way in and out is compared. The ratio is service round trips (one PUT
 * and one GET) per second of transfer time ÷ node:fs round trips (one write and one read) per second.
 */
export const uploadDownload: Scenario = {
  name: 'upload-download',
  description: '1 MiB upload + download through the local blob store vs node:fs write (flushed) + read of the same bytes',
  async run(ctx) {
    const bytes = pngOfSize(FILE_BYTES);
    const account = await signUp(ctx.serviceUrl);
    const service = serviceTransfers(ctx.serviceUrl, account.cookie, account.workspaceId, bytes);
    const fsDir = path.resolve('.data', 'bench-fs');
    await fs.mkdir(fsDir, { recursive: true });
    const plain = fsTransfers(fsDir, bytes);
    const durationMs = ctx.options.durationS * 1000;

    await measure(Math.min(2000, durationMs), service);
    await measure(Math.min(2000, durationMs), plain);
    ctx.log(`upload-download: service, batches of ${BATCH} with ${WORKERS} concurrent transfers, ${ctx.options.durationS} s`);
    const served = await measure(durationMs, service);
    ctx.log(`upload-download: node:fs, batches of ${BATCH} with ${WORKERS} concurrent transfers, ${ctx.options.durationS} s`);
    const local = await measure(durationMs, plain);
    await fs.rm(fsDir, { recursive: true, force: true });

    const mib = (run: Measured) => (run.roundTrips * 2 * FILE_BYTES) / (run.transferMs / 1000) / (1024 * 1024);
    return {
      result: summary('service PUT + GET 1 MiB (local blob store)', `${ctx.serviceUrl}/v1/blobs/*`, served),
      baseline: summary('node:fs writeFile (flush) + readFile 1 MiB', `file://${fsDir}`, local),
      notes: [
        `service: ${served.roundTrips} round trips, ${mib(served).toFixed(1)} MiB/s moved (up + down) in transfer time; node:fs: ${local.roundTrips}, ${mib(local).toFixed(1)} MiB/s`,
        `JSON calls around the service transfers (upload URL, completion, download URL, delete), untimed: ${(served.untimedMs / Math.max(1, served.roundTrips)).toFixed(1)} ms per file`,
      ],
    };
  },
};

const BATCH = 16;

interface Measured {
  /** Per round trip: its PUT (or write) plus its GET (or read), in ms. */
  latencies: number[];
  roundTrips: number;
  transferMs: number;
  untimedMs: number;
  errors: number;
}

/** One kind of transfer, in three steps per batch: prepare (untimed), up and down (timed), clean up (untimed). */
interface Transfers<T> {
  prepare(count: number): Promise<T[]>;
  up(item: T): Promise<void>;
  between(items: T[]): Promise<void>;
  down(item: T): Promise<void>;
  cleanUp(items: T[]): Promise<void>;
}

async function measure<T>(durationMs: number, transfers: Transfers<T>): Promise<Measured> {
  const run: Measured = { latencies: [], roundTrips: 0, transferMs: 0, untimedMs: 0, errors: 0 };
  const until = performance.now() + durationMs;
  while (performance.now() < until) {
    let at = performance.now();
    const items = await transfers.prepare(BATCH);
    run.untimedMs += performance.now() - at;
    const perItem = new Array<number>(items.length).fill(0);
    at = performance.now();
    await pool(
      items,
      async (item, i) => {
        perItem[i]! += await timed(() => transfers.up(item));
      },
      run,
    );
    run.transferMs += performance.now() - at;
    at = performance.now();
    await transfers.between(items);
    run.untimedMs += performance.now() - at;
    at = performance.now();
    await pool(
      items,
      async (item, i) => {
        perItem[i]! += await timed(() => transfers.down(item));
      },
      run,
    );
    run.transferMs += performance.now() - at;
    at = performance.now();
    await transfers.cleanUp(items);
    run.untimedMs += performance.now() - at;
    run.latencies.push(...perItem);
    run.roundTrips += items.length;
  }
  return run;
}

/** Runs `work` over `items`, WORKERS at a time. */
async function pool<T>(items: T[], work: (item: T, index: number) => Promise<void>, run: Measured): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (next < items.length) {
        const index = next++;
        try {
          await work(items[index]!, index);
        } catch {
          run.errors++;
        }
      }
    }),
  );
}

async function timed(work: () => Promise<void>): Promise<number> {
  const at = performance.now();
  await work();
  return performance.now() - at;
}

interface ServiceItem {
  uploadId: string;
  url: string;
  headers: Record<string, string>;
  assetId?: string;
  downloadUrl?: string;
}

function serviceTransfers(serviceUrl: string, cookie: string, workspaceId: string, bytes: Buffer): Transfers<ServiceItem> {
  const json = async (method: string, pathname: string, body?: unknown) => {
    const res = await fetch(`${serviceUrl}${pathname}`, {
      method,
      headers: { 'content-type': 'application/json', cookie },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${pathname}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  return {
    prepare: (count) =>
      Promise.all(
        Array.from({ length: count }, () =>
          json('POST', '/v1/files/upload-url', { workspaceId, filename: 'bench.png', contentType: 'image/png', bytes: bytes.length }),
        ),
      ),
    // undici's request, not fetch: fetch's own overhead on a 1 MiB body would dwarf the service's.
    async up(item) {
      const res = await request(item.url, { method: 'PUT', headers: item.headers, body: bytes });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`PUT: ${res.statusCode}`);
    },
    async between(items) {
      await Promise.all(
        items.map(async (item) => {
          item.assetId = (await json('POST', '/v1/files/upload-complete', { workspaceId, uploadId: item.uploadId })).id;
          item.downloadUrl = (await json('GET', `/v1/assets/${item.assetId}/download`)).url;
        }),
      );
    },
    async down(item) {
      const res = await request(item.downloadUrl!);
      const got = Buffer.from(await res.body.arrayBuffer());
      if (res.statusCode !== 200 || got.length !== bytes.length) throw new Error(`GET: ${res.statusCode}, ${got.length} bytes`);
    },
    async cleanUp(items) {
      await Promise.all(items.map((item) => json('DELETE', `/v1/assets/${item.assetId}`)));
    },
  };
}

function fsTransfers(dir: string, bytes: Buffer): Transfers<string> {
  return {
    prepare: async (count) => Array.from({ length: count }, () => path.join(dir, randomBytes(8).toString('hex'))),
    up: (file) => fs.writeFile(file, bytes, { flush: true }),
    between: async () => {},
    async down(file) {
      const back = await fs.readFile(file);
      if (back.length !== bytes.length) throw new Error('short read');
    },
    cleanUp: async (files) => {
      await Promise.all(files.map((file) => fs.rm(file, { force: true })));
    },
  };
}

/** A PNG signature padded to `size`: upload-complete sniffs only the first bytes. */
function pngOfSize(size: number): Buffer {
  const bytes = randomBytes(size);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes, 0);
  return bytes;
}

function mean(values: number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** The harness reports LoadSummary figures; one round trip (up and down) counts as one request. */
function summary(title: string, url: string, run: Measured): LoadSummary {
  const sorted = [...run.latencies].sort((a, b) => a - b);
  const seconds = run.transferMs / 1000;
  const round = (n: number) => Math.round(n * 100) / 100;
  return measuredSummary({
    title,
    url,
    method: 'PUT+GET',
    connections: WORKERS,
    durationS: round(seconds),
    reqPerSec: round(seconds > 0 ? run.roundTrips / seconds : 0),
    totalRequests: run.roundTrips,
    latencyMs: {
      mean: round(mean(sorted)),
      p50: round(percentile(sorted, 50)),
      p90: round(percentile(sorted, 90)),
      p99: round(percentile(sorted, 99)),
      max: round(sorted[sorted.length - 1] ?? 0),
    },
    throughputBytesPerSec: Math.round(seconds > 0 ? (run.roundTrips * 2 * FILE_BYTES) / seconds : 0),
    errors: run.errors,
  });
}
