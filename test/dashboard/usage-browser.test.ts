import fs from 'node:fs';
import t from 'tap';
import { parse } from 'csv-parse/sync';
import { buildDashboard } from '../../dashboard/build.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { get, MONEY_ENV, post } from '../money/support.ts';
import { CHROMIUM, freePort, openBrowser, screenshot } from './support.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * Usage you can see, prices you can explain, budgets that warn, in Chromium: the usage chart (uPlot) with its
 * breakdown by model and by key and the CSV export, the budget banner after a threshold was crossed, a
 * generation's price explained with its timeline durations, the generations list with its columns and
 * filters, and the playground's price apart from what a job holds. Screenshots under test/artifacts/.
 */
// Page-side: an image matched by the selector has loaded (a function, as the page's CSP refuses eval).
const imageShown = `(selector) => { const img = document.querySelector(selector); return img !== null && img.complete && img.naturalWidth > 0; }`;

// A bound against hanging only.
const finished = (server: TestServer, cookie: string, workspaceId: string, id: string): Promise<any> =>
  eventually(
    async () => {
      const res = await get(server, `/v1/generations/${id}?workspaceId=${workspaceId}`, cookie);
      return ['succeeded', 'failed', 'cancelled', 'expired'].includes(res.body.status) && res.body;
    },
    { timeoutMs: 120_000, everyMs: 20, what: `${id} finishing` },
  );

if (!fs.existsSync(CHROMIUM)) {
  t.plan(0, `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the dashboard's browser tests`);
} else {
  t.setTimeout(300_000);
  await buildDashboard();

  t.test('usage over time, the breakdowns, the export, the budget banner, a price explained, the list and the playground', async (t) => {
    const port = await freePort();
    const server = await startTestServer(t, { env: { ...MONEY_ENV, PORT: String(port), RATE_LIMIT_FREE: '100000' } });
    const owner = await signUp(server);
    const ws = owner.workspaceId;
    const key = await createKey(server, owner.cookie, ws, ['all'], { name: 'ci-bot' });
    // A day of work: images through the key, texts signed in; past 10 % of the free plan's 100 credits.
    const set = await post(server, '/v1/budgets', owner.cookie, { workspaceId: ws, creditsUsedPercents: [10, 90] }, 'PATCH');
    t.equal(set.status, 200, JSON.stringify(set.body));
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const body =
        i % 2 === 0
          ? { workspaceId: ws, mode: 'text_to_image', model: 'local/image-fast', params: { prompt: `a lantern at dusk, number ${i}`, numImages: 1 } }
          : { workspaceId: ws, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: `Describe lantern ${i} in one line.` } };
      const created = await post(server, '/v1/generations', i % 2 === 0 ? key.key : owner.cookie, body);
      t.equal(created.status, 201, JSON.stringify(created.body));
      ids.push(created.body.id);
    }
    for (const id of ids) await finished(server, owner.cookie, ws, id);
    const budgets = await eventually(
      async () => {
        const answer = await get(server, `/v1/budgets?workspaceId=${ws}`, owner.cookie);
        return answer.body.alerts.length > 0 && answer.body;
      },
      { timeoutMs: 20_000, everyMs: 20, what: 'a budget alert' },
    );
    t.equal(budgets.alerts[0].threshold, 10);

    const { page } = await openBrowser(t);
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    // Console errors, but the browser's own "Failed to load resource" lines (its favicon probe): the responses
    // the pages asked for are held to below 400 by the listener that follows.
    page.on('console', (message) => {
      if (message.type() === 'error' && !/^Failed to load resource/.test(message.text())) pageErrors.push(message.text());
    });
    page.on('response', (response) => {
      if (response.status() >= 400) pageErrors.push(`${response.status()} ${response.url()}`);
    });
    const [name, value] = owner.cookie.split(/=(.*)/s) as [string, string];
    await page.context().addCookies([{ name, value, url: server.url }]);

    // --- the usage page: the banner, the chart, the breakdowns, the export, the ledger in words
    await page.goto(`${server.url}/`);
    await page.getByRole('heading', { name: 'Usage over time' }).waitFor();
    const banner = page.getByTestId('budget-banner');
    await banner.waitFor();
    t.match(await banner.textContent(), /10 % of this period's 100 credits used/, 'the budget banner says what was crossed');
    const chart = page.getByTestId('usage-chart');
    await chart.locator('canvas').waitFor();
    t.ok(await chart.locator('.u-legend').isVisible(), 'uPlot drew the chart with its legend');
    t.match(await chart.locator('.u-legend').textContent(), /local\/image-fast.*local\/text-mini|local\/text-mini.*local\/image-fast/s, 'one line per model');
    const byModel = page.getByTestId('usage-by-model');
    await byModel.locator('tr[data-group="local/image-fast"]').waitFor();
    t.match(await byModel.locator('tr[data-group="local/image-fast"]').textContent(), /^local\/image-fast3/, 'three image jobs in the breakdown by model');
    t.match(await byModel.locator('tr[data-group="local/text-mini"]').textContent(), /^local\/text-mini3/, 'three text jobs');
    const byKey = page.getByTestId('usage-by-key');
    t.match(await byKey.locator(`tr[data-group="${key.id}"]`).textContent(), new RegExp(`^${key.id}3`), "the key's three jobs");
    t.match(await byKey.locator('tr[data-group="signed in (no key)"]').textContent(), /3/, 'and the three made signed in');
    // Switching the figure redraws.
    await page.getByLabel('Show').selectOption('jobs');
    await chart.locator('canvas').waitFor();
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('usage-export').click()]);
    const csv = fs.readFileSync((await download.path())!, 'utf8');
    const rows = parse(csv, { columns: true }) as Array<Record<string, string>>;
    t.equal(
      rows.reduce((n, r) => n + Number(r.total), 0),
      6,
      'the exported CSV holds the six jobs',
    );
    t.same(Object.keys(rows[0]!).slice(0, 3), ['bucket', 'model', 'key'], 'by model and key');
    const descriptions = await page.getByTestId('ledger-description').allTextContents();
    t.ok(
      descriptions.some((d) => /held for generation gen_/.test(d)),
      'the ledger says in words what each entry is',
    );
    await page.getByRole('heading', { name: 'Budget alerts' }).scrollIntoViewIfNeeded();
    t.equal(await page.getByLabel("Credits used (% of the period's grant)").inputValue(), '10, 90', 'the thresholds, configurable here');
    await screenshot(page, 'usage-over-time');

    // --- the generations list: excerpt, model, status, credits, duration, thumbnail; filters by model and key
    await page.goto(`${server.url}/generations`);
    await page.locator(`tr[data-generation="${ids[0]}"]`).waitFor();
    await page.getByTestId('budget-banner').waitFor();
    t.pass('the budget banner shows on every page of the workspace');
    const imageRow = page.locator(`tr[data-generation="${ids[0]}"]`);
    t.match(
      await imageRow.textContent(),
      /a lantern at dusk, number 0.*local\/image-fast.*succeeded.*4\d*(\.\d)? ?(ms|s)/s,
      'prompt, model, status, credits, duration',
    );
    await imageRow.locator('img.thumb').waitFor();
    await page.waitForFunction(imageShown, `tr[data-generation="${ids[0]}"] img.thumb`);
    t.pass('its thumbnail is drawn');
    await page.getByTestId('filter-key').selectOption(key.id);
    await page.locator(`tr[data-generation="${ids[1]}"]`).waitFor({ state: 'detached' });
    t.equal(await page.locator('tbody tr').count(), 3, "filtered by key: the key's three jobs");
    await page.getByTestId('filter-key').selectOption('');
    await page.getByTestId('filter-model').selectOption('local/text-mini');
    await page.locator(`tr[data-generation="${ids[0]}"]`).waitFor({ state: 'detached' });
    t.equal(await page.locator('tbody tr').count(), 3, 'filtered by model: the three texts');
    await screenshot(page, 'generations-list');

    // --- a generation's page: why it cost that, and each step's duration
    await page.goto(`${server.url}/generations/${ids[0]}`);
    const explained = page.getByTestId('price-explained');
    await explained.waitFor();
    t.match(await page.getByTestId('price-explanation').textContent(), /^1 image x 4 credits = 4 credits, held at creation; charged on success/);
    t.match(await explained.textContent(), /Ran on.*local.*1\. \S+ succeeded/s, 'where it ran, each attempt');
    t.match(await page.locator('ol.timeline').textContent(), /\+\d+(\.\d)? ?(ms|s)/, 'the timeline shows each step’s duration');
    await screenshot(page, 'generation-price');

    // --- the playground: the price, and apart from it what a job holds
    await page.goto(`${server.url}/playground`);
    await page.getByTestId('model-price').waitFor();
    t.match(await page.getByTestId('model-price').textContent(), /^Price: .+ · Held while a job runs \(with the default settings\): \d+ credits/);
    await screenshot(page, 'playground-price');
    t.same(pageErrors, [], 'no script errors, no refused request');
  });
}
