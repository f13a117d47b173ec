import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { get, MONEY_ENV, post } from '../money/support.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * Prices you can explain: GET /v1/generations/:id carries its price terms, what they counted, the exact cost,
 * what was held, charged and given back (its ledger in words), the token carry before and after, and where
 * it ran; its timeline says how long each step took; the workspace's ledger says what each entry is.
 */

function tokenCatalog(t: Test): string {
  const shipped = fs.readFileSync(new URL('../../catalog/default.yaml', import.meta.url), 'utf8');
  const priced = shipped.replace(
    /(- id: local\/text-mini[\s\S]*?)price: \{ per: job, credits: 1 \}/,
    '$1price: { per: tokens, inputPer1k: 0.5, outputPer1k: 1.5 }',
  );
  if (priced === shipped) throw new Error('the shipped catalog no longer prices local/text-mini per job');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'explain-catalog-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'catalog.yaml');
  fs.writeFileSync(file, priced);
  return file;
}

// A bound against hanging only (a loaded machine runs the local model slowly).
const finished = (server: TestServer, id: string, credential: string, workspaceId: string): Promise<any> =>
  eventually(
    async () => {
      const res = await get(server, `/v1/generations/${id}?workspaceId=${workspaceId}`, credential);
      if (['succeeded', 'failed', 'cancelled', 'expired'].includes(res.body.status)) return res.body;
      if (res.status !== 200) throw new Error(`GET ${id}: ${res.status} ${JSON.stringify(res.body)}`);
      return undefined;
    },
    { timeoutMs: 120_000, everyMs: 20, what: `${id} finishing` },
  );

const NANO = 1_000_000_000n;

t.test('a token-priced job that charged 0 credits is explained: terms, tokens, exact cost, carry before and after, ledger in words', async (t) => {
  const server = await startTestServer(t, { env: { ...MONEY_ENV, CATALOG_FILE: tokenCatalog(t) } });
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const key = await createKey(server, owner.cookie, ws, ['all']);

  let carry = 0n;
  for (const prompt of ['Hi.', 'Say one short thing.', 'And another.']) {
    const created = await post(server, '/v1/generations', key.key, {
      workspaceId: ws,
      mode: 'text_to_text',
      model: 'local/text-mini',
      params: { prompt, maxTokens: 40 },
    });
    t.equal(created.status, 201, JSON.stringify(created.body));
    t.notOk('price' in created.body, 'the create answer keeps its shape');
    const job = await finished(server, created.body.id, key.key, ws);
    t.equal(job.status, 'succeeded');
    const price = job.price;
    t.match(price, { unit: 'tokens', termsFrom: 'generation', inputPer1k: 0.5, outputPer1k: 1.5 }, 'its price terms');
    const { inputTokens, outputTokens } = price.counted;
    t.same([inputTokens, outputTokens], [job.usage.inputTokens, job.usage.outputTokens], 'the tokens counted are those reported');
    const exact = BigInt(inputTokens) * 500_000n + BigInt(outputTokens) * 1_500_000n;
    t.equal(price.exactCost, (Number(exact) / 1e9).toString(), 'the exact cost, as a decimal of credits');
    t.equal(price.carryBeforeNano, String(carry), 'the carry before is the one the previous job left');
    const owed = exact + carry;
    t.equal(price.chargedCredits, Number(owed / NANO), 'charged the whole credits of cost plus carry');
    t.equal(job.credits, price.chargedCredits);
    t.equal(price.carryAfterNano, String(owed % NANO), 'the rest carried');
    carry = owed % NANO;
    t.match(price.explanation, /input tokens .* output tokens .* credits; with the workspace's carry of/, 'said in words');
    t.same(
      price.ledger.map((e: { kind: string }) => e.kind),
      ['reserve', 'capture', 'release'],
      'held, charged, the rest given back',
    );
    t.match(price.ledger[0].description, /held for generation gen_\w+ while it runs/);
    if (price.chargedCredits === 0)
      t.match(price.ledger[1].description, /charged nothing: its cost was below one credit and went into the workspace's token carry/);
    t.match(price.ledger[2].description, /given back/);
    t.equal(price.reservedCredits, price.ledger[0].reservedCredits, 'what was held, from the ledger');

    // Where it ran: one attempt, on the deployment it holds, with its outcome.
    t.match(job.route, { deploymentId: 'local-text-mini', provider: 'local' });
    t.same(
      job.route.attempts.map((a: { number: number; deploymentId: string; outcome: string }) => [a.number, a.deploymentId, a.outcome]),
      [[1, 'local-text-mini', 'succeeded']],
    );
    // Each step's time since the previous one adds up to the job's whole time.
    const steps = job.timeline.map((e: { sincePreviousMs: number }) => e.sincePreviousMs);
    t.ok(
      steps.every((ms: number) => Number.isInteger(ms) && ms >= 0),
      'each step has its duration',
    );
    t.equal(
      steps.reduce((a: number, b: number) => a + b, 0),
      Date.parse(job.timeline.at(-1).at) - Date.parse(job.createdAt),
      'the steps add up to the time from creation to the end',
    );
  }
  t.ok(carry > 0n, 'a fraction is carried after three small jobs');

  // The list filters by the API key that made the jobs.
  const byKey = await get(server, `/v1/generations?workspaceId=${ws}&apiKeyId=${key.id}`, owner.cookie);
  t.equal(byKey.status, 200, JSON.stringify(byKey.body));
  t.equal(byKey.body.data.length, 3, "the key's three jobs");
  const otherKey = await createKey(server, owner.cookie, ws, ['all']);
  t.same((await get(server, `/v1/generations?workspaceId=${ws}&apiKeyId=${otherKey.id}`, owner.cookie)).body.data, [], 'another key made none');

  // The workspace's ledger says in words what each entry is.
  const credits = await get(server, `/v1/workspaces/${ws}/credits`, owner.cookie);
  t.equal(credits.status, 200, JSON.stringify(credits.body));
  for (const entry of credits.body.ledger) t.ok(typeof entry.description === 'string' && entry.description.length > 10, `${entry.kind}: ${entry.description}`);
  t.ok(
    credits.body.ledger.some(
      (e: { kind: string; description: string }) => e.kind === 'grant' && /credits added: the plan's opening credits/.test(e.description),
    ),
    'the opening grant',
  );
});

t.test('an image job: priced per image from the catalog, held then charged', async (t) => {
  const server = await startTestServer(t, { env: MONEY_ENV });
  const owner = await signUp(server);
  const created = await post(server, '/v1/generations', owner.cookie, {
    workspaceId: owner.workspaceId,
    mode: 'text_to_image',
    model: 'local/image-fast',
    params: { prompt: 'a lantern', numImages: 2 },
  });
  t.equal(created.status, 201, JSON.stringify(created.body));
  const job = await finished(server, created.body.id, owner.cookie, owner.workspaceId);
  t.match(job.price, {
    unit: 'image',
    termsFrom: 'catalog',
    creditsPerUnit: 4,
    counted: { units: 2 },
    exactCost: '8',
    chargedCredits: 8,
    chargedFromBalance: 8,
    carryBeforeNano: null,
  });
  t.equal(job.price.explanation, '2 images x 4 credits = 8 credits, held at creation; charged on success (8 from credits, 0 cents from the wallet).');
  const other = await signUp(server);
  t.equal((await get(server, `/v1/generations/${created.body.id}`, other.cookie)).status, 404, "another workspace's job stays 404");
});
