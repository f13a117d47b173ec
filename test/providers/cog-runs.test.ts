import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { makePng } from '../helpers/files.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { startRelay } from '../helpers/relay.ts';
import { dataUrl, startCogFake } from '../fakes/cog.ts';
import { createGeneration, isTerminal, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';

/**
 * Runs per job at Cog through the real server, in normal operation: runs of 1, 2 and 3 poll intervals, their
 * ends taken at once, or refused for a while at the service's public address (a relay answering 503) and
 * retried by Cog on its own schedule. A PUT of a prediction that ended runs it again (docs/providers/cog.md),
 * so a backstop PUT landing between a run's end and the arrival of that end would make a second run: each job
 * must run once and be PUT once, whatever the poll interval.
 */
const POLL_MS = 100;
const fake = await startCogFake({
  slots: 12,
  requiredInputs: ['prompt'],
  model: (input) => ({ output: [dataUrl('image/png', makePng(8, 8))], durationMs: Number(/^runs (\d+)/.exec(String(input.prompt))?.[1] ?? 1) * POLL_MS }),
});
t.teardown(() => fake.close());
const front = await startRelay(t);

const catalogFile = providerCatalogFile(t, [
  {
    id: 'acme/painter',
    mode: 'text_to_image',
    credits: 3,
    parameters: { prompt: { required: true }, aspectRatio: {} },
    deployment: { id: 'painter-cog', provider: 'cog', target: {}, input: { aspectRatio: { width: 'width', height: 'height', longSide: 64 } } },
  },
]);
const server = await startTestServer(t, {
  env: {
    BASE_URL: front.url,
    CATALOG_FILE: catalogFile,
    ALLOW_PRIVATE_EGRESS: 'true',
    COG_BASE_URL: fake.url,
    COG_WEBHOOK_SECRET: 'cog-webhook-secret-of-at-least-32-characters',
    COG_MAX_CONCURRENT_JOBS: '12',
    PROVIDER_POLL_MS: String(POLL_MS),
  },
});
front.target = server.url;
const user = await signUp(server);
const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);

async function create(prompt: string): Promise<string> {
  const created = await createGeneration(server, key, user.workspaceId, {
    mode: 'text_to_image',
    model: 'acme/painter',
    params: { prompt, aspectRatio: '1:1' },
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
  return created.body.id as string;
}

t.test('runs of 1, 2 and 3 poll intervals, their ends on time or retried by Cog: one run and one PUT per job', async (t) => {
  const ids: string[] = [];
  for (const round of ['on time', 'refused for a while'] as const) {
    const batch: string[] = [];
    for (const intervals of [1, 2, 3]) for (let i = 0; i < 2; i++) batch.push(await create(`runs ${intervals} (${round})`));
    if (round === 'refused for a while') {
      // The public address answers 503 from now on for a while: the ends meanwhile are retried by Cog (0.2 s, 0.4 s, ...).
      front.target = undefined;
      await new Promise((resolve) => setTimeout(resolve, 4 * POLL_MS));
      front.target = server.url;
    }
    for (const id of batch) {
      const g = await waitFor(server, key, user.workspaceId, id, isTerminal, 'a terminal state');
      t.equal(g.status, 'succeeded', `${round}: ${JSON.stringify([g.errorCode, g.errorMessage])}`);
    }
    ids.push(...batch);
  }
  t.ok(
    fake.webhooksSent.some((w) => w.status === 'succeeded' && w.answer === 503),
    'some ends were refused and retried',
  );
  const runs = ids.map((id) => fake.runs.get(id));
  const puts = ids.map((id) => fake.puts.get(id));
  t.same(runs, Array(ids.length).fill(1), `one run per job: ${JSON.stringify(runs)}`);
  t.same(puts, Array(ids.length).fill(1), `one PUT per job: ${JSON.stringify(puts)}`);
  t.equal(fake.cancels.size, 0);

  const money = await moneyOf(serverQuery(server), user.workspaceId);
  t.equal(money.available, PLAN_CREDITS - ids.length * 3, 'each charged once');
});
