import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { buildDashboard, DASHBOARD_DIST } from '../../dashboard/build.ts';
import { ROOT } from '../fixtures/child.ts';
import { freePort } from '../helpers/ports.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = path.join(ROOT, 'test/artifacts');

/** Builds the dashboard when the install did not (a checkout made before it existed, or with --ignore-scripts). */
export async function ensureDashboardBuilt(): Promise<void> {
  if (fs.existsSync(path.join(DASHBOARD_DIST, 'index.html'))) return;
  await buildDashboard();
}

/** Debian's Chromium driven by playwright-core (no browser download), on a fresh profile, closed when the test ends. */
export async function openBrowser(t: Test): Promise<{ context: BrowserContext; page: Page }> {
  const profile = await fsp.mkdtemp(path.join(os.tmpdir(), 'gs-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 860 },
    timeout: 120_000,
  });
  t.teardown(async () => {
    await context.close().catch(() => {});
    await fsp.rm(profile, { recursive: true, force: true });
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(60_000);
  return { context, page };
}

/** Saves a full-page screenshot under test/artifacts/ (git-ignored); returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await fsp.mkdir(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

export { freePort };
