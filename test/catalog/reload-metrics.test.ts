import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { catalogFile, metricValue, plan, servedVersion, textModel, until } from './support.ts';

/**
 * The catalog's metrics as an alert reads them (docs/observability.md, docs/catalog.md "Reload"): one
 * gs_catalog_version series per node, the version served now and none before it (a version-skew alert
 * compares nodes, not a node's past), and gs_catalog_reloads_total counting each reload once by its outcome:
 * the file event's applied or refused, then SIGHUP on the same file `unchanged`, never a second refusal.
 */
const first = { defaultPlan: 'basic', plans: [plan('basic')], models: [textModel('acme/writer', { per: 'job', credits: 2 }, ['basic'])] };
const priced = (credits: number) => ({ ...first, models: [textModel('acme/writer', { per: 'job', credits }, ['basic'])] });

/** The gs_catalog_version samples of a scrape: label value and sample value. */
async function versionSeries(metricsUrl: string): Promise<Array<{ version: string; value: number }>> {
  const text = await (await fetch(metricsUrl)).text();
  return [...text.matchAll(/^gs_catalog_version\{([^}]*)\} (\S+)$/gm)].map((m) => ({
    version: /gs_version="([^"]*)"/.exec(m[1]!)?.[1] ?? '',
    value: Number(m[2]),
  }));
}

t.test('one version series per node, each reload counted once, unchanged included', async (t) => {
  const file = catalogFile(t, first);
  // The poll an hour apart: the file event of each rename is what reloads.
  const server = await startTestServer(t, { env: { CATALOG_FILE: file.file, CATALOG_POLL_MS: '3600000' } });
  const metricsUrl = server.metricsUrl!;
  const count = (outcome: string) => metricValue(metricsUrl, 'gs_catalog_reloads_total', { gs_outcome: outcome });
  // Ready first: /health/ready names the version once start-up recovery is done.
  const v1 = await until('ready', () => servedVersion(server.url));
  t.same(await versionSeries(metricsUrl), [{ version: v1, value: 1 }], 'at start: one series, the version served');

  const versions = [v1];
  for (const credits of [3, 4]) {
    file.swap(priced(credits));
    versions.push(await until('the new version served', async () => ((v) => (v && !versions.includes(v) ? v : undefined))(await servedVersion(server.url))));
  }
  t.equal(new Set(versions).size, 3, 'three versions served in turn');
  t.same(
    await versionSeries(metricsUrl),
    [{ version: versions[2], value: 1 }],
    'after two reloads: still one series, the current version; the old ones are gone',
  );
  t.equal(await count('applied'), 2, 'two applied');

  // SIGHUP (what app/main.ts calls) on the file the event already took: unchanged, counted once.
  const again = await server.services.catalogSource.reload();
  t.same(again, { outcome: 'unchanged', version: versions[2] }, 'a reload of the same file is unchanged');
  t.equal(await count('unchanged'), 1, 'and counted as unchanged');
  t.equal(await count('applied'), 2, 'not as applied');

  // A broken file: refused once by its file event; the SIGHUP after it reads the same file and says so, as unchanged.
  file.swapText('{ "defaultPlan": "basic", "plans": [');
  await until('the broken file refused', async () => ((await count('refused')) >= 1 ? true : undefined));
  const hup = await server.services.catalogSource.reload();
  t.equal(hup.outcome, 'unchanged', 'SIGHUP on the refused file: unchanged');
  t.ok(hup.outcome === 'unchanged' && hup.problems && hup.problems.length > 0, 'with the problems it was refused for');
  t.equal(await count('refused'), 1, 'the refusal counted once, not again at SIGHUP');
  t.equal(await count('unchanged'), 2);
  t.same(await versionSeries(metricsUrl), [{ version: versions[2], value: 1 }], 'the version served stays, one series');

  // The same valid content again after the broken one: the catalog served, so unchanged (not applied).
  file.swap(priced(4));
  await until('the file read again', async () => ((await count('unchanged')) >= 3 ? true : undefined));
  t.equal(await count('applied'), 2, 'the catalog it already serves is not counted as applied');
  t.equal(await count('refused'), 1);
});
