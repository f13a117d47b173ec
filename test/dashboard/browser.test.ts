import fs from 'node:fs';
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { makePng } from '../helpers/files.ts';
import { uniqueEmail } from '../helpers/identity.ts';
import { eventually, startReceiver } from '../webhooks/support.ts';
import { CHROMIUM, ensureDashboardBuilt, freePort, openBrowser, screenshot } from './support.ts';

// Page-side: an image matched by the selector has loaded. A function, not an expression: Playwright evaluates it
// once and then calls it on each poll, where the page's Content-Security-Policy (no 'unsafe-eval') refuses a
// string evaluated again.
const imageShown = `(selector) => { const img = document.querySelector(selector); return img !== null && img.complete && img.naturalWidth > 0; }`;

/**
 * The web dashboard in a real browser (Debian's Chromium through playwright-core), against the real service:
 * sign up, an API key shown once, a text-to-image generation from the playground followed live to succeeded
 * with its image on screen, an upload, and a webhook delivery. Each page is saved under test/artifacts/.
 */
if (!fs.existsSync(CHROMIUM)) {
  t.plan(0, `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the dashboard's browser tests`);
} else {
  t.setTimeout(300_000);
  await ensureDashboardBuilt();

  t.test('a person signs up, makes a key, generates an image, uploads a file and sees a webhook delivery', async (t) => {
    const port = await freePort();
    // PORT fixed so BASE_URL is the page's origin: the Origin check of cookie-authenticated writes sees its own.
    const server = await startTestServer(t, { env: { PORT: String(port), ALLOW_PRIVATE_EGRESS: 'true', LOCAL_PROVIDER_LATENCY_MS: '1500' } });
    const base = server.url;
    const { page } = await openBrowser(t);
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });

    // --- signed out: any page leads to the login page
    await page.goto(`${base}/keys`);
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    t.equal(new URL(page.url()).pathname, '/login', 'a signed-out visitor lands on /login');
    await screenshot(page, 'login');

    // --- sign up
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByRole('heading', { name: 'Create an account' }).waitFor();
    const email = uniqueEmail('browser');
    const password = 'a-long-browser-password';
    await page.getByLabel('Name').fill('Ada Browser');
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(password);
    await screenshot(page, 'signup');
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.getByRole('heading', { name: 'Usage and credits' }).waitFor();
    await page.getByTestId('available-credits').waitFor();
    t.equal(await page.getByTestId('available-credits').textContent(), '100', 'the new workspace shows its 100 opening credits');
    const cookies = await page.context().cookies(base);
    const session = cookies.find((cookie) => cookie.name === 'gs_session');
    t.ok(session?.httpOnly, 'signed in with an HttpOnly session cookie');
    await page.locator('[data-plan="free"] h3').filter({ hasText: '(current)' }).waitFor();
    t.ok(
      await page
        .getByRole('button', { name: /^Upgrade to / })
        .first()
        .isVisible(),
      'the plans are offered, the free one current',
    );
    await page.getByRole('button', { name: 'Upgrade to Pro' }).click();
    await page.waitForURL(/\/v1\/billing\/local\/checkout\/[^/]+$/);
    await page.getByRole('heading', { name: 'Checkout' }).waitFor();
    t.pass("upgrading opens the payment provider's checkout (the local one here)");
    await screenshot(page, 'checkout');
    await page.goBack();
    await page.getByRole('heading', { name: 'Usage and credits' }).waitFor();
    // each model's price on the workspace's plan, as GET /v1/models gives it from the catalog served
    const prices = page.getByTestId('price-table');
    await prices.locator('[data-model="local/text-mini"]').waitFor();
    const textMini = await prices.locator('[data-model="local/text-mini"]').textContent();
    t.match(textMini, /1 credit a job/, "the price table shows a model's price on the plan");
    t.match(textMini, /\$0\.05 a credit/, 'and what a credit costs from the wallet on it');
    t.match(await prices.locator('[data-model="local/video-restyle"]').textContent(), /not on the free plan/, 'a model the plan lacks says so');
    await screenshot(page, 'usage');
    // a wallet top-up goes through the same checkout; paid, the money is in the wallet
    t.equal(await page.getByTestId('wallet-balance').textContent(), '$0.00', 'the wallet starts empty');
    await page.getByLabel('Amount (US dollars)').fill('25');
    await page.getByRole('button', { name: 'Deposit at checkout' }).click();
    await page.waitForURL(/\/v1\/billing\/local\/checkout\/[^/]+$/);
    await page.getByRole('heading', { name: 'Checkout' }).waitFor();
    t.match(await page.locator('body').textContent(), /Wallet deposit: \$25\.00/, 'a wallet top-up reaches the checkout for its amount');
    await screenshot(page, 'wallet-checkout');
    await page.getByRole('button', { name: 'Pay $25.00' }).click();
    await page.getByText(/paid\./).waitFor();
    await eventually(
      async () => {
        await page.goto(`${base}/`);
        await page.getByTestId('wallet-balance').waitFor();
        return (await page.getByTestId('wallet-balance').textContent()) === '$25.00' ? true : undefined;
      },
      'the paid deposit is in the wallet',
      60_000,
    );
    t.match(await page.getByTestId('wallet-deposits').textContent(), /\$25\.00\s*checkout\s*paid/, 'and listed as a cleared deposit');

    // the workspace picker knows the personal workspace
    await page.getByRole('link', { name: 'Workspaces' }).click();
    await page.getByRole('heading', { name: 'Workspaces' }).waitFor();
    t.ok(await page.getByRole('cell', { name: /Ada Browser's workspace/ }).isVisible(), 'the personal workspace is listed');
    const workspaceId = await page.locator('#workspace-picker').inputValue();
    t.match(workspaceId, /^ws_/, 'and picked');
    await page.getByRole('cell', { name: email }).waitFor();
    t.pass('its members list the owner');
    const invitee = uniqueEmail('invitee');
    await page.getByLabel('E-mail').fill(invitee);
    await page.getByRole('button', { name: 'Invite' }).click();
    t.match(await page.getByTestId('invitation-token').textContent(), /\S{16,}/, "an invitation's token is shown once");
    await page.getByRole('cell', { name: invitee }).waitFor();
    t.pass('and the pending invitation is listed');
    await screenshot(page, 'workspaces');

    // --- an API key, shown once
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
    await page.getByLabel('Name').fill('browser key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = page.getByTestId('new-key');
    await shown.waitFor();
    const key = (await shown.textContent()) ?? '';
    t.match(key, /^gs_live_[A-Za-z0-9]{64}$/, 'the plaintext key is on screen');
    await page.getByRole('cell', { name: 'browser key' }).waitFor();
    await screenshot(page, 'keys');
    const withKey = await server.json(`/v1/models?workspaceId=${workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(withKey.status, 200, 'the key shown works against the API');
    await page.getByRole('button', { name: 'I have stored it' }).click();
    t.notOk((await page.content()).includes(key), 'once dismissed, the key is nowhere on the page');
    await page.reload();
    await page.getByRole('cell', { name: 'browser key' }).waitFor();
    const listed = await page.content();
    t.notOk(listed.includes(key), 'nor after a reload: the list shows its prefix only');
    t.ok(listed.includes(`${key.slice(0, 12)}…`), "the list shows the key's prefix");

    // --- the playground: text to image, followed live to succeeded with the image shown
    await page.getByRole('link', { name: 'Playground' }).click();
    await page.getByRole('heading', { name: 'Playground' }).waitFor();
    await page.getByLabel('Model').selectOption('local/image-fast');
    await page.getByLabel(/^prompt/).fill('a red kite over the sea');
    await screenshot(page, 'playground');
    await page.getByRole('button', { name: 'Generate' }).click();
    await page.waitForURL(/\/generations\/gen_[a-z0-9]+$/);
    const generationId = new URL(page.url()).pathname.split('/').pop()!;
    const firstStatus = await page.locator('.status-line [data-status]').getAttribute('data-status');
    await page.locator('.status-line [data-status="succeeded"]').waitFor({ timeout: 120_000 });
    t.comment(`the generation page showed ${firstStatus} first, then succeeded without a reload`);
    const image = page.locator(`img[data-asset-id]`);
    await image.waitFor();
    // (page functions as strings: this project type-checks for Node, without the DOM's types)
    await page.waitForFunction(imageShown, 'img[data-asset-id]');
    const size = (await page.evaluate(
      `(() => { const img = document.querySelector('img[data-asset-id]'); return { width: img.naturalWidth, height: img.naturalHeight }; })()`,
    )) as { width: number; height: number };
    t.ok(size.width > 0 && size.height > 0, `the output image is loaded and drawn (${size.width}×${size.height})`);
    const timeline = await page.locator('.timeline [data-status]').evaluateAll((items) => items.map((item) => item.getAttribute('data-status')));
    t.same(timeline[0], 'queued', 'the timeline starts at queued');
    t.same(timeline[timeline.length - 1], 'succeeded', 'and ends at succeeded');
    const detail = await server.json(`/v1/generations/${generationId}?workspaceId=${workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
    t.equal(detail.body.status, 'succeeded', 'the API agrees');
    t.equal(await image.getAttribute('data-asset-id'), detail.body.outputAssetIds[0], "the image shown is the generation's output");
    await screenshot(page, 'generation');
    // a narrow screen: the page reflows without sideways scrolling
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
    t.ok(overflow <= 0, 'on a 390 px wide screen the generation page needs no sideways scrolling');
    await screenshot(page, 'generation-narrow');
    await page.setViewportSize({ width: 1280, height: 860 });

    await page.getByRole('link', { name: 'Generations' }).click();
    await page.getByRole('link', { name: generationId }).waitFor();
    await screenshot(page, 'generations');

    // --- upload an image through the presigned flow
    await page.getByRole('link', { name: 'Assets' }).click();
    await page.getByRole('heading', { name: 'Assets' }).waitFor();
    const png = makePng(8, 8);
    await page.getByLabel(/^File/).setInputFiles({ name: 'pixel.png', mimeType: 'image/png', buffer: png });
    await page.getByRole('button', { name: 'Upload' }).click();
    const uploadedId = (await page.getByTestId('uploaded-asset').textContent()) ?? '';
    t.match(uploadedId, /^ast_/, 'the upload ends with its asset id on screen');
    const asset = await server.json(`/v1/assets/${uploadedId}?workspaceId=${workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
    t.match(asset.body, { contentType: 'image/png', bytes: png.length, name: 'pixel.png', mediaType: 'image' }, 'the asset holds the file the browser sent');
    await page.locator(`article[data-asset-id="${uploadedId}"] img`).waitFor();
    await page.waitForFunction(imageShown, `article[data-asset-id="${uploadedId}"] img`);
    t.equal(await page.evaluate(`document.querySelector('article[data-asset-id="${uploadedId}"] img').naturalWidth`), 8, 'at its own width');
    t.pass('the uploaded image is shown in the grid');
    await screenshot(page, 'assets');

    // --- a webhook endpoint and a delivery to it
    const receiver = await startReceiver(t);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
    await page.getByLabel('URL').fill(receiver.url);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    t.match(await page.getByTestId('webhook-secret').textContent(), /^whsec_/, 'the signing secret is shown once');
    const created = await server.json('/v1/generations', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'hello hooks' } }),
    });
    t.equal(created.status, 201, 'a generation made with the key');
    const [received] = await receiver.waitFor(1, 120_000);
    t.equal(
      received!.body?.data?.id ?? received!.body?.data?.generation?.id ?? received!.body?.generationId ?? created.body.id,
      created.body.id,
      'the receiver got its event',
    );
    await eventually(
      async () => {
        await page.getByRole('button', { name: 'Refresh deliveries' }).click();
        const row = page.getByTestId('deliveries').locator('tr', { hasText: created.body.id });
        return (await row.count()) > 0 && (await row.locator('[data-status="delivered"]').count()) > 0 ? true : undefined;
      },
      'the delivery shows as delivered on the webhooks page',
      120_000,
    );
    const row = page.getByTestId('deliveries').locator('tr', { hasText: created.body.id });
    t.match(await row.textContent(), /generation\.completed/, 'the delivery row names its event');
    t.match(await row.locator('.attempts').textContent(), /^200 · \d+ ms/, 'and its attempt, answered 200');
    await screenshot(page, 'webhooks');

    // a test event: sent now, its outcome on screen
    await page.getByRole('button', { name: 'Send test event' }).click();
    const outcome = page.getByTestId('test-outcome');
    await outcome.waitFor();
    t.match(await outcome.textContent(), /delivered · answered 200 · \d+ ms$/, "the test event's outcome is shown: delivered, 200, its duration");
    const afterTest = await receiver.waitFor(2, 60_000);
    t.equal(afterTest[1]!.body?.event, 'webhook.test', 'the receiver got the signed webhook.test event');
    // resend: a new delivery of the same event appears in the list, and reaches the receiver with the same body id
    const originalId = await row.getAttribute('data-delivery-id');
    await row.getByRole('button', { name: 'Resend' }).click();
    const rows = page.getByTestId('deliveries').locator('tbody tr', { hasText: created.body.id });
    await page
      .getByTestId('deliveries')
      .locator('tbody tr', { hasText: `resend of ${originalId}` })
      .waitFor();
    t.equal(await rows.count(), 2, 'after a resend the list shows a second delivery of the generation');
    const afterResend = await receiver.waitFor(3, 120_000);
    t.equal(afterResend[2]!.body?.id, received!.body?.id, 'the resend carries the original body (its id)');
    await eventually(
      async () => {
        await page.getByRole('button', { name: 'Refresh deliveries' }).click();
        const resent = page.getByTestId('deliveries').locator('tbody tr', { hasText: `resend of ${originalId}` });
        return (await resent.locator('[data-status="delivered"]').count()) > 0 ? true : undefined;
      },
      'the resent delivery shows as delivered',
      120_000,
    );
    // rotation: a new secret, shown once with a copy button
    const firstSecret = await page.getByTestId('webhook-secret').textContent();
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByRole('region', { name: 'New signing secret' }).waitFor();
    const rotated = (await page.getByTestId('webhook-secret').textContent()) ?? '';
    t.match(rotated, /^whsec_/, 'a rotated secret is shown');
    t.not(rotated, firstSecret, 'and it is a new one');
    t.ok(await page.getByRole('button', { name: 'Copy secret' }).isVisible(), 'with a copy button');
    await screenshot(page, 'webhooks-operations');
    await page.getByRole('button', { name: 'I have stored it' }).click();
    t.notOk((await page.content()).includes(rotated), 'once dismissed, the secret is nowhere on the page');

    // --- the generation page reads the live stream when the service has one (GET /v1/generations/:id/stream:
    // the current state, each transition, then the end), and polls the detail when it answers 404. The browser
    // is given each answer here (page.route), so both paths are held whatever this service serves.
    const text = await server.json('/v1/generations', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ workspaceId, mode: 'text_to_text', model: 'local/text-mini', params: { prompt: 'stream me' } }),
    });
    const done = await eventually(
      async () => {
        const read = await server.json(`/v1/generations/${text.body.id}?workspaceId=${workspaceId}`, { headers: { authorization: `Bearer ${key}` } });
        return read.body.status === 'succeeded' ? read.body : undefined;
      },
      'the text generation succeeds',
      120_000,
    );
    const streamRequests: string[] = [];
    const at = (status: string) => ({ status, at: done.createdAt });
    const events = [
      { ...done, status: 'queued', textOutput: null, completedAt: null, timeline: [at('queued')] },
      { generation: { ...done, status: 'running', textOutput: null, completedAt: null, timeline: [at('queued'), at('running')] } },
      { ...done, textOutput: 'the streamed answer', timeline: [at('queued'), at('running'), at('succeeded')] },
    ];
    const sse = `: connected\n\n${events.map((event, index) => `id: ${index + 1}\nevent: generation\ndata: ${JSON.stringify(event)}\n\n`).join('')}`;
    await page.route('**/v1/generations/*/stream*', async (route) => {
      streamRequests.push(route.request().url());
      await route.fulfill({ status: 200, headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-store' }, body: sse });
    });
    await page.goto(`${base}/generations/${text.body.id}`);
    await page.getByTestId('text-output').filter({ hasText: 'the streamed answer' }).waitFor();
    t.equal(await page.locator('.status-line [data-status]').getAttribute('data-status'), 'succeeded', "the stream's last state is shown");
    t.same(
      await page.locator('.timeline [data-status]').evaluateAll((items) => items.map((item) => item.getAttribute('data-status'))),
      ['queued', 'running', 'succeeded'],
      'with the timeline it carried',
    );
    t.equal(streamRequests.length, 1, 'one stream was opened');
    t.equal(new URL(streamRequests[0]!).searchParams.get('workspaceId'), workspaceId, 'naming the workspace');
    await page.unroute('**/v1/generations/*/stream*');
    await page.route('**/v1/generations/*/stream*', (route) =>
      route.fulfill({
        status: 404,
        contentType: 'application/json; charset=utf-8',
        body: JSON.stringify({ error: { code: 'not_found', message: 'No route.', requestId: 'req_x' } }),
      }),
    );
    await page.goto(`${base}/generations/${text.body.id}`);
    await page.getByTestId('text-output').filter({ hasText: done.textOutput }).waitFor();
    t.pass('without a stream (404), the page shows the generation as the detail reads it');
    await page.unroute('**/v1/generations/*/stream*');

    // --- errors are the envelope's message: a wrong password on the login page
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    const refused = await server.json('/v1/auth/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'not-the-password' }),
    });
    t.equal(await alert.textContent(), refused.body.error.message, "the login page shows the API's own message");
    await screenshot(page, 'login-refused');
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Usage and credits' }).waitFor();
    t.pass('and logs in again with the right one');
    // a session that ends while a page is open (the cookie gone) leads back to the login page at the next call
    await page.context().clearCookies();
    await page.getByRole('link', { name: 'Generations' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    t.equal(new URL(page.url()).pathname, '/login', 'an ended session returns to /login');

    t.same(
      pageErrors.filter((message) => !/status of 40[14]/.test(message)),
      [],
      'no script errors in the page',
    );
  });
}
