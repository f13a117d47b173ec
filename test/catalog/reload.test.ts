import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { createGeneration, isTerminal, ledgerByGeneration, moneyOf, serverQuery, waitFor } from '../generations/flow.ts';
import { catalogFile, metricValue, plan, servedVersion, textModel, until } from './support.ts';

/**
 * The catalog file replaced while the service works (docs/catalog.md, "Reload"): creates run on without a
 * failure, each job charged the price in force when it was created, a new model and plan served within a
 * second, an invalid file refused with the old catalog kept, and jobs of a removed model finishing where and
 * at the price they were created with. PGlite, or PostgreSQL and Redis with TEST_DATABASE_URL/TEST_REDIS_URL.
 */

/** What a create may answer besides 201: the documented refusals (credits, plan limits, rate limit, pause, a workspace moving). */
const REFUSALS = new Set([402, 422, 429, 503]);

const writer = (credits: number) => textModel('acme/writer', { per: 'job', credits }, ['basic']);
const first = { defaultPlan: 'basic', plans: [plan('basic')], models: [writer(2)] };
const second = {
  defaultPlan: 'basic',
  plans: [plan('basic'), plan('studio', { monthlyPriceCents: 1900, centsPerCredit: 3 })],
  models: [writer(5), textModel('acme/newcomer', { per: 'job', credits: 11 }, ['basic', 'studio'])],
};

interface Sent {
  id?: string;
  status: number;
  sentAt: number;
  answeredAt: number;
}

t.test('a catalog swapped under continuous creates: no create fails, each job pays the price of its version, the new model and plan are served', async (t) => {
  const file = catalogFile(t, first);
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file, LOCAL_PROVIDER_LATENCY_MS: '0' } });
  await server.recovered;
  const v1 = await servedVersion(server.url);
  t.ok(v1, 'the first version is served');

  const users = await Promise.all([0, 1, 2].map(() => signUp(server)));
  const keys = await Promise.all(users.map((u) => createKey(server, u.cookie, u.workspaceId, ['generations.write', 'generations.read'])));
  const sent: Sent[] = [];
  let running = true;
  // Six clients, two per workspace, each sending its next create when the last is answered.
  const clients = [0, 1, 2, 3, 4, 5].map(async (n) => {
    const i = n % 3;
    while (running) {
      const sentAt = performance.now();
      const reply = await createGeneration(server, keys[i]!.key, users[i]!.workspaceId, {
        mode: 'text_to_text',
        model: 'acme/writer',
        params: { prompt: `job ${sent.length}` },
      });
      sent.push({ id: reply.status === 201 ? reply.body.id : undefined, status: reply.status, sentAt, answeredAt: performance.now() });
    }
  });
  await until('some creates answered on the first version', () => (sent.length >= 60 ? true : undefined));

  const writtenAt = performance.now();
  file.swap(second);
  // The new model, asked for at once and again until it is created; and the version, polled meanwhile.
  const [newcomer, seenAt] = await Promise.all([
    until(
      'the new model created',
      async () => {
        const reply = await createGeneration(server, keys[0]!.key, users[0]!.workspaceId, {
          mode: 'text_to_text',
          model: 'acme/newcomer',
          params: { prompt: 'new' },
        });
        return reply.status === 201 ? { id: reply.body.id as string, at: performance.now() } : undefined;
      },
      5_000,
      5,
    ),
    until('the new version reported', async () => ((await servedVersion(server.url)) !== v1 ? performance.now() : undefined), 5_000, 5),
  ]);
  const v2 = await servedVersion(server.url);
  t.not(v2, v1, '/health/ready reports the new version');
  t.comment(
    `new version reported ${Math.round(seenAt - writtenAt)} ms after the rename; the new model created after ${Math.round(newcomer.at - writtenAt)} ms`,
  );
  // How soon is a figure of the machine's load, not a verdict: the next test shows the file event alone reloads.
  t.pass(`the new model can be created ${Math.round(newcomer.at - writtenAt)} ms after the file change`);
  const countAtSwitch = sent.length;
  await until('more creates answered on the second version', () => (sent.length >= countAtSwitch + 60 ? true : undefined));
  running = false;
  await Promise.all(clients);

  const refused = sent.filter((s) => s.status !== 201);
  t.same(
    refused.filter((s) => !REFUSALS.has(s.status)).map((s) => s.status),
    [],
    'every create answered 201 or a documented refusal',
  );
  t.equal(refused.length, 0, 'in fact every create was accepted (nothing in this workspace reaches a limit)');

  const query = serverQuery(server);
  const rows = await query<{ id: string; credits: number; deployment_id: string; status: string }>(
    `select id, credits, deployment_id, status from generations where workspace_id in (?, ?, ?)`,
    users.map((u) => u.workspaceId),
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  let before = 0;
  let after = 0;
  let window = 0;
  for (const s of sent.filter((x) => x.id)) {
    const credits = Number(byId.get(s.id!)!.credits);
    if (s.answeredAt < writtenAt) {
      before++;
      if (credits !== 2) t.fail(`${s.id}, answered before the change, was charged ${credits}, not 2`);
    } else if (s.sentAt > seenAt) {
      after++;
      if (credits !== 5) t.fail(`${s.id}, sent after the new version was seen, was charged ${credits}, not 5`);
    } else {
      window++;
      if (credits !== 2 && credits !== 5) t.fail(`${s.id}, created during the switch, was charged ${credits}: neither price`);
    }
  }
  t.ok(before > 0 && after > 0, `jobs on both sides of the switch (${before} before, ${window} during, ${after} after)`);
  t.equal(Number(byId.get(newcomer.id)!.credits), 11, "the new model's job pays its price");

  const models = await server.json(`/v1/models?workspaceId=${users[0]!.workspaceId}`, { headers: { authorization: `Bearer ${keys[0]!.key}` } });
  t.equal(models.status, 200, JSON.stringify(models.body));
  t.equal(models.headers.get('etag'), `"${v2}-basic"`, 'the models list answers with the new version');
  t.same(
    models.body.data.map((m: { id: string; credits: number }) => [m.id, m.credits]),
    [
      ['acme/writer', 5],
      ['acme/newcomer', 11],
    ],
    'and the new prices and model',
  );
  const plans = await server.json('/v1/plans');
  t.same(
    plans.body.data.map((p: { id: string }) => p.id),
    ['basic', 'studio'],
    'the new plan is listed',
  );

  // Every job to its end, then the books: each workspace's balance is its ledger, every reservation settled.
  await until(
    'every job ended',
    async () => {
      const open = await query<{ n: string }>(
        `select count(*)::int8 as n from generations where workspace_id in (?, ?, ?) and status not in ('succeeded', 'failed', 'cancelled', 'expired')`,
        users.map((u) => u.workspaceId),
      );
      return Number(open[0]!.n) === 0 ? true : undefined;
    },
    20_000,
    50,
  );
  for (const user of users) {
    const money = await moneyOf(query, user.workspaceId);
    t.equal(money.available, money.ledgerAvailable, 'balance equals the ledger');
    t.equal(money.reserved, 0, 'nothing left reserved');
  }
});

t.test('an invalid file is refused and counted, the old catalog stays; a valid one after it applies', async (t) => {
  const file = catalogFile(t, first);
  // The poll an hour apart: every reload here follows the file event of the rename, at once.
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file, LOCAL_PROVIDER_LATENCY_MS: '0', CATALOG_POLL_MS: '3600000' } });
  await server.recovered;
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const v1 = await servedVersion(server.url);
  const refusedCount = () => metricValue(server.metricsUrl!, 'gs_catalog_reloads_total', { gs_outcome: 'refused' });
  const appliedCount = () => metricValue(server.metricsUrl!, 'gs_catalog_reloads_total', { gs_outcome: 'applied' });
  const before = await refusedCount();

  // Not JSON at all, then JSON that is no valid catalog (a model in a plan the file lacks).
  file.swapText('{ "defaultPlan": "basic", "plans": [');
  await until('the broken file refused', async () => ((await refusedCount()) >= before + 1 ? true : undefined));
  file.swap({ ...first, models: [textModel('acme/writer', { per: 'job', credits: 9 }, ['gold'])] });
  await until('the wrong catalog refused', async () => ((await refusedCount()) >= before + 2 ? true : undefined));
  t.equal(await refusedCount(), before + 2, 'each refusal counted once, as gs_catalog_reloads_total{gs_outcome="refused"}');
  t.equal(await servedVersion(server.url), v1, 'the version served is the old one');
  const kept = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'acme/writer', params: { prompt: 'still here' } });
  t.equal(kept.status, 201);
  t.equal(kept.body.credits, 2, 'creates are priced by the old catalog');

  const applied = await appliedCount();
  file.swap({ ...first, models: [writer(7)] });
  const v3 = await until('the valid file applied', async () => {
    const version = await servedVersion(server.url);
    return version !== v1 ? version : undefined;
  });
  t.ok(v3, 'a valid file after the refused ones is served');
  t.equal(await appliedCount(), applied + 1, 'and counted as applied');
  const repriced = await createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model: 'acme/writer', params: { prompt: 'new price' } });
  t.equal(repriced.body.credits, 7, 'at the new price');
});

t.test('a model removed while one of its jobs runs and one waits: both finish on their deployment at their price', async (t) => {
  const old = textModel('acme/retired', { per: 'job', credits: 3 }, ['basic']);
  const file = catalogFile(t, { defaultPlan: 'basic', plans: [plan('basic', { concurrentJobs: 1 })], models: [writer(2), old] });
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file, LOCAL_PROVIDER_LATENCY_MS: '1500' } });
  await server.recovered;
  const user = await signUp(server);
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const create = (model: string) => createGeneration(server, key, user.workspaceId, { mode: 'text_to_text', model, params: { prompt: 'retire me' } });
  const running = await create('acme/retired');
  t.equal(running.status, 201);
  await waitFor(server, key, user.workspaceId, running.body.id, (g) => g.status === 'running', 'running');
  const queued = await create('acme/retired');
  t.equal(queued.status, 201);
  t.equal(queued.body.status, 'queued', 'the second waits: the plan runs one job at a time');

  const v1 = await servedVersion(server.url);
  // The model gone, and the price of what replaced it different: nothing of either reaches the two jobs.
  file.swap({ defaultPlan: 'basic', plans: [plan('basic', { concurrentJobs: 1 })], models: [writer(4)] });
  await until('the file without the model applied', async () => ((await servedVersion(server.url)) !== v1 ? true : undefined));
  const refused = await create('acme/retired');
  t.equal(refused.status, 400);
  t.equal(refused.body.error?.code, 'validation_error', 'a new job of the removed model is refused');
  t.match(refused.body.error?.message, /unknown model "acme\/retired"/);

  const done = [];
  for (const id of [running.body.id, queued.body.id]) done.push(await waitFor(server, key, user.workspaceId, id, isTerminal, 'its end'));
  t.same(
    done.map((g) => [g.status, g.credits]),
    [
      ['succeeded', 3],
      ['succeeded', 3],
    ],
    'both succeeded at the price they were created with',
  );
  const query = serverQuery(server);
  const rows = await query<{ id: string; deployment_id: string }>('select id, deployment_id from generations where workspace_id = ? order by created_at', [
    user.workspaceId,
  ]);
  t.same(
    rows.map((r) => r.deployment_id),
    ['acme-retired-local', 'acme-retired-local'],
    'on the deployment they were created for',
  );
  const ledger = await ledgerByGeneration(query, user.workspaceId);
  for (const id of [running.body.id, queued.body.id]) t.same(ledger[id], { reserve: 1, capture: 1 }, `${id}: reserved and captured once`);
  const money = await moneyOf(query, user.workspaceId);
  t.same(money, { available: 1_000_000 - 6, reserved: 0, ledgerAvailable: 1_000_000 - 6, ledgerReserved: 0, reservations: [] }, 'the books: 2 × 3 credits');
});
