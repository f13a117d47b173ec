import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { fundedWorkspaces } from '../lib/steady-creates.ts';
import type { BenchContext, ExtraServer, LoadSummary, Scenario, ScenarioOutcome } from '../lib/types.ts';

/**
 * Creates/s with a catalog of 20 models against one of 2,000, same run: the shipped catalog's plans and
 * models, plus generated text models on the local provider (each with a deployment of its own) up to the
 * size. Each workspace's creates name a different generated model, spread over the whole catalog, so a cost
 * that grows with the catalog (a scan per request, a cache per model) shows.
 */
const SIZES = [20, 2_000] as const;
const WORKSPACES = 8;
const ROUNDS = 3;

interface ModelSpec {
  id: string;
  deployments: Array<Record<string, unknown>>;
  [field: string]: unknown;
}

/** The shipped catalog grown to `size` models with copies of its small text model, as a JSON file. */
function catalogOfSize(dir: string, size: number): { file: string; generated: string[] } {
  const shipped = parse(readFileSync(path.join(import.meta.dirname, '../../catalog/default.yaml'), 'utf8')) as { models: ModelSpec[] };
  const template = shipped.models.find((m) => m.id === 'local/text-mini')!;
  const generated: string[] = [];
  for (let i = shipped.models.length; i < size; i++) {
    const id = `bench/text-${String(i).padStart(4, '0')}`;
    generated.push(id);
    shipped.models.push({ ...template, id, name: `Bench text ${i}`, deployments: [{ id: `bench-text-${i}`, provider: 'local' }] });
  }
  const file = path.join(dir, `catalog-${size}.json`);
  writeFileSync(file, JSON.stringify(shipped));
  return { file, generated };
}

async function run(ctx: BenchContext): Promise<ScenarioOutcome> {
  const dir = mkdtempSync(path.join(tmpdir(), 'gs-bench-catalog-'));
  const servers: ExtraServer[] = [];
  try {
    const setups = [];
    for (const size of SIZES) {
      const { file, generated } = catalogOfSize(dir, size);
      const server = await ctx.startService(`service (catalog of ${size} models)`, {
        CATALOG_FILE: file,
        RATE_LIMIT_TEAM: '1000000',
        LOCAL_PROVIDER_LATENCY_MS: '0',
      });
      servers.push(server);
      const workspaces = await fundedWorkspaces(server.url, WORKSPACES, 1_000_000);
      // Workspace i names the generated model at i/WORKSPACES of the way through the catalog.
      const variants = workspaces.map((w, i) => ({
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          workspaceId: w.workspaceId,
          mode: 'text_to_text',
          model: generated[Math.floor((i * generated.length) / WORKSPACES)],
          params: { prompt: 'Say hello in five words.' },
        }),
      }));
      // The models list of a large catalog, once: its first read builds the view kept for the catalog's life.
      const listed = await fetch(`${server.url}/v1/models?workspaceId=${workspaces[0]!.workspaceId}`, {
        headers: { authorization: `Bearer ${workspaces[0]!.key}` },
      });
      const count = ((await listed.json()) as { data: unknown[] }).data.length;
      setups.push({ size, server, variants, count });
    }
    const runs = new Map<number, LoadSummary[]>(SIZES.map((size) => [size, []]));
    // Loaded in turn (small, large, small, large…), so the load other processes put on the machine falls on both alike.
    for (let round = 0; round < ROUNDS; round++) {
      for (const setup of setups) {
        runs.get(setup.size)!.push(
          await ctx.load({
            server: setup.server,
            path: '/v1/generations',
            method: 'POST',
            skipWarmup: round > 0,
            variants: setup.variants,
            title: `POST /v1/generations (text job, run at once), catalog of ${setup.size} models, round ${round + 1}`,
          }),
        );
      }
    }
    const best = (list: LoadSummary[]) => list.reduce((a, b) => (b.reqPerSec > a.reqPerSec ? b : a));
    const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
    const [small, large] = [best(runs.get(SIZES[0])!), best(runs.get(SIZES[1])!)];
    const cpu = (size: number) => median(runs.get(size)!.map((r) => r.serverCpuUsPerRequest ?? Number.NaN));
    const non2xx = [...runs.values()].flat().reduce((sum, r) => sum + r.non2xx, 0);
    return {
      result: large,
      baseline: small,
      target: 0.95,
      notes: [
        `best of ${ROUNDS} interleaved runs each: ${small.reqPerSec} creates/s with ${SIZES[0]} models, ${large.reqPerSec} with ${SIZES[1]} (all runs: ${runs
          .get(SIZES[0])!
          .map((r) => r.reqPerSec)
          .join(', ')} / ${runs
          .get(SIZES[1])!
          .map((r) => r.reqPerSec)
          .join(', ')})`,
        `server CPU per create, median of the runs: ${cpu(SIZES[0])} µs with ${SIZES[0]} models, ${cpu(SIZES[1])} µs with ${SIZES[1]}`,
        `GET /v1/models listed ${setups.map((s) => s.count).join(' and ')} models`,
        ...(non2xx > 0 ? [`non-2xx answers in these runs: ${non2xx}`] : []),
      ],
    };
  } finally {
    for (const server of servers) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export const catalogSize: Scenario = {
  name: 'catalog-size',
  description:
    'POST /v1/generations (Bearer key, text job run at once, 8 team workspaces, each naming a model spread over the catalog) with a catalog of 2,000 models vs 20, same run; target: at least 0.95',
  run,
};
