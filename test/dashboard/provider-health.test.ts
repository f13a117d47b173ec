import fs from 'node:fs';
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { signUp } from '../helpers/identity.ts';
import { PROVIDER_ERROR_CODES } from '../../providers/adapter.ts';
import { CHROMIUM, ensureDashboardBuilt, freePort, openBrowser, screenshot } from './support.ts';

/** The Provider health page in a real browser: every deployment's breaker as GET /v1/breakers reads it. */
if (!fs.existsSync(CHROMIUM)) {
  t.plan(0, `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the dashboard's browser tests`);
} else {
  t.setTimeout(120_000);
  await ensureDashboardBuilt();

  t.test("Provider health shows each deployment's breaker: open, half-open and closed", async (t) => {
    const port = await freePort();
    const server = await startTestServer(t, { env: { PORT: String(port) } });
    const owner = await signUp(server);
    const [opened, limited, healthy] = server.services.catalog.deployments();
    if (!opened || !limited || !healthy) throw new Error('the shipped catalog has fewer than three deployments');
    for (let i = 0; i < 10; i++) await server.services.breakers.record(opened.id, { ok: false, errorCode: PROVIDER_ERROR_CODES.timeout });
    // A Retry-After of 0 ms: open, and at once past its cool-down, so the page reads half-open.
    await server.services.breakers.record(limited.id, { ok: false, errorCode: PROVIDER_ERROR_CODES.rateLimited, retryAfterMs: 0 });
    await server.services.breakers.record(healthy.id, { ok: true });
    await server.services.breakers.record(healthy.id, { ok: false, errorCode: PROVIDER_ERROR_CODES.contentPolicy });

    const { page } = await openBrowser(t);
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    const [name, value] = owner.cookie.split(/=(.*)/s) as [string, string];
    await page.context().addCookies([{ name, value, url: server.url }]);
    await page.goto(`${server.url}/`);
    await page.getByRole('link', { name: 'Provider health' }).click();
    await page.getByRole('heading', { name: 'Provider health' }).waitFor();
    t.equal(new URL(page.url()).pathname, '/provider-health');
    const row = (id: string) => page.locator(`tr[data-deployment="${id}"]`);
    await row(opened.id).waitFor();
    t.equal(await page.locator('tbody tr').count(), server.services.catalog.deployments().length, 'a row per deployment');
    t.equal(await row(opened.id).locator('[data-state]').getAttribute('data-state'), 'open');
    t.match(await row(opened.id).textContent(), /open.*30 s/, 'open, with its cool-down');
    t.equal(await row(limited.id).locator('[data-state]').textContent(), 'half-open');
    t.equal(await row(healthy.id).locator('[data-state]').textContent(), 'closed');
    t.match(await row(healthy.id).textContent(), /1\s*0 %/, 'one counted call, none failed: the refused prompt is not counted');
    t.match(await page.getByTestId('health-summary').textContent(), /^2 of \d+ deployments are not closed\.$/);
    await screenshot(page, 'provider-health');

    // The half-open deployment's job succeeds: the page shows it closed at its next reading.
    const ticket = await server.services.breakers.admit(limited.id);
    await server.services.breakers.record(limited.id, { ok: true }, (ticket as { ticket: string }).ticket);
    await page.locator(`tr[data-deployment="${limited.id}"] [data-state="closed"]`).waitFor({ timeout: 15_000 });
    t.pass('refreshed on its own within its 5 s period');
    t.same(pageErrors, [], 'no script errors');
  });
}
