import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { parse } from 'csv-parse/sync';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { serverQuery } from '../generations/flow.ts';
import { auth, completeCheckout, get, MONEY_ENV, post } from './support.ts';
import type { Query } from './usage-support.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * GET /v1/usage/series answers from the hourly and daily rows of usage_series: known jobs created in known
 * hours give the known sums per group, equal to a recount over the generations, the ledger and the assets;
 * the CSV export parses with a standard parser into the same points.
 */

const text = (prompt: string, extra: Record<string, unknown> = {}) => ({ mode: 'text_to_text', model: 'local/text-mini', params: { prompt }, ...extra });
const image = (prompt: string, extra: Record<string, unknown> = {}) => ({
  mode: 'text_to_image',
  model: 'local/image-fast',
  params: { prompt, numImages: 1 },
  ...extra,
});

async function runOut(server: TestServer, clock: ManualClock, query: Query, workspaceIds: string[]): Promise<void> {
  // Each try moves the clock a step when jobs are left (400 steps before, at 10 ms: a bound against hanging only).
  await eventually(
    async () => {
      await server.services.actors.drain();
      await server.services.writer.flush();
      const [row] = await query<{ n: string | number }>(
        `select count(*) as n from generations where workspace_id in (?) and status in ('queued', 'reserved', 'submitted', 'running')`,
        [workspaceIds],
      );
      if (Number(row!.n) === 0) return true;
      clock.advance(5_000);
      return false;
    },
    { timeoutMs: 60_000, what: 'the jobs finishing' },
  );
}

const DIMENSION_SQL = { model: 'g.model_id', key: "coalesce(g.api_key_id, '')", project: "coalesce(g.project, '')", mode: 'g.mode' } as const;
type Dimension = keyof typeof DIMENSION_SQL;

/** The series recounted from the rows: per UTC bucket and group, the figures of the generations created in it. */
async function recountSeries(query: Query, workspaceId: string, grain: 'hour' | 'day', groupBy: Dimension[], where = '', params: unknown[] = []) {
  const groups = groupBy.map((d) => DIMENSION_SQL[d]);
  const rows = await query<Record<string, unknown>>(
    `select to_char(date_trunc('${grain}', g.created_at at time zone 'UTC'), 'YYYY-MM-DD"T"HH24:MI:SS.000"Z"') as bucket
            ${groups.map((c, i) => `, ${c} as g${i}`).join('')},
            count(*) as total, count(*) filter (where g.status = 'succeeded') as succeeded, count(*) filter (where g.status = 'failed') as failed,
            count(*) filter (where g.status = 'cancelled') as cancelled, count(*) filter (where g.status = 'expired') as expired,
            count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')) as unfinished,
            coalesce(sum(g.credits) filter (where l.captures > 0), 0) as credits, coalesce(sum(-l.reserved_credits), 0) as credits_from_balance,
            coalesce(sum(-l.reserved_wallet_cents), 0) as cost_cents,
            coalesce(sum((g.usage ->> 'inputTokens')::bigint), 0) as tokens_in, coalesce(sum((g.usage ->> 'outputTokens')::bigint), 0) as tokens_out,
            coalesce(sum(b.bytes), 0) as output_bytes
       from generations g
       left join lateral (select count(*) as captures, sum(reserved_credits) as reserved_credits, sum(reserved_wallet_cents) as reserved_wallet_cents
                            from credit_ledger l where l.workspace_id = g.workspace_id and l.kind = 'capture' and l.generation_id = g.id) l on true
       left join lateral (select sum(a.bytes) as bytes from assets a where a.workspace_id = g.workspace_id and a.source_generation_id = g.id) b on true
      where g.workspace_id = ? ${where}
      group by 1 ${groups.map((_, i) => `, g${i}`).join('')}`,
    [workspaceId, ...params],
  );
  return rows
    .map((r) =>
      JSON.stringify([
        r.bucket,
        Object.fromEntries(groupBy.map((d, i) => [d, String(r[`g${i}`])])),
        ...[
          'total',
          'succeeded',
          'failed',
          'cancelled',
          'expired',
          'unfinished',
          'credits',
          'credits_from_balance',
          'cost_cents',
          'tokens_in',
          'tokens_out',
          'output_bytes',
        ].map((c) => Number(r[c])),
      ]),
    )
    .sort();
}

interface Point {
  bucket: string;
  group: Record<string, string>;
  generations: { total: number; succeeded: number; failed: number; cancelled: number; expired: number; unfinished: number };
  credits: number;
  creditsFromBalance: number;
  costCents: number;
  tokensIn: number;
  tokensOut: number;
  outputBytes: number;
}

const lineOf = (p: Point) =>
  JSON.stringify([
    p.bucket,
    p.group,
    p.generations.total,
    p.generations.succeeded,
    p.generations.failed,
    p.generations.cancelled,
    p.generations.expired,
    p.generations.unfinished,
    p.credits,
    p.creditsFromBalance,
    p.costCents,
    p.tokensIn,
    p.tokensOut,
    p.outputBytes,
  ]);

/** The shipped catalog with local/text-mini priced per token, so its jobs report and are charged their tokens. */
function tokenCatalog(t: Test): string {
  const shipped = fs.readFileSync(new URL('../../catalog/default.yaml', import.meta.url), 'utf8');
  const priced = shipped.replace(
    /(- id: local\/text-mini[\s\S]*?)price: \{ per: job, credits: 1 \}/,
    '$1price: { per: tokens, inputPer1k: 0.5, outputPer1k: 1.5 }',
  );
  if (priced === shipped) throw new Error('the shipped catalog no longer prices local/text-mini per job');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'series-catalog-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'catalog.yaml');
  fs.writeFileSync(file, priced);
  return file;
}

t.test('known jobs in known hours give the known sums per group, equal to a recount, and the CSV parses into the same points', async (t) => {
  const start = Date.UTC(2026, 5, 1, 22, 10, 0);
  const clock = new ManualClock(start);
  const server = await startTestServer(t, {
    clock,
    env: {
      ...MONEY_ENV,
      CATALOG_FILE: tokenCatalog(t),
      RATE_LIMIT_FREE: '100000',
      QUEUE_TIMEOUT_MS: '60000',
      LOCAL_PROVIDER_LATENCY_MS: '20000',
      LOCAL_PROVIDER_FAILURE_PERCENT: '30',
    },
  });
  const query = serverQuery(server);
  const owner = await signUp(server);
  const ws = owner.workspaceId;
  const k1 = await createKey(server, owner.cookie, ws, ['all'], { name: 'one' });
  const k2 = await createKey(server, owner.cookie, ws, ['all'], { name: 'two' });
  const other = await signUp(server);
  const otherKey = await createKey(server, other.cookie, other.workspaceId, ['all']);
  const order = await post(server, '/v1/wallet/top-ups', owner.cookie, { workspaceId: ws, amountCents: 5000 });
  t.equal(order.status, 201, JSON.stringify(order.body));
  await completeCheckout(order.body.checkoutUrl, 'pay');

  const create = async (credential: string, body: Record<string, unknown>, workspaceId = ws) => {
    const created = await post(server, '/v1/generations', credential, { workspaceId, ...body });
    t.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.id as string;
  };
  // Three hours, across midnight UTC: 22:10 and 23:10 on June 1st, 00:10 on June 2nd. Per hour: key one makes
  // two texts in project "alpha" and one image; key two one text (wallet); the session one image in "beta".
  for (let hour = 0; hour < 3; hour++) {
    const began = clock.now();
    await create(k1.key, text(`h${hour} a`, { project: 'alpha' }));
    await create(k1.key, text(`h${hour} b`, { project: 'alpha' }));
    await create(k1.key, image(`h${hour} c`));
    await create(k2.key, text(`h${hour} d`, { paymentMode: 'wallet' }));
    await create(owner.cookie, image(`h${hour} e`, { project: 'beta', paymentMode: 'auto' }));
    await create(otherKey.key, text(`h${hour} other`), other.workspaceId);
    await runOut(server, clock, query, [ws, other.workspaceId]);
    clock.advance(3_600_000 - (clock.now() - began));
  }
  // One job left running counts as unfinished in its hour (01:10).
  await create(k1.key, text('left', { project: 'alpha' }));
  await server.services.writer.flush();

  const range = 'from=2026-06-01T22:00:00Z&to=2026-06-02T02:00:00Z';
  const byHour = await get(server, `/v1/usage/series?workspaceId=${ws}&granularity=hour&${range}&groupBy=model`, owner.cookie);
  t.equal(byHour.status, 200, JSON.stringify(byHour.body));
  t.equal(byHour.body.granularity, 'hour');
  t.equal(byHour.body.from, '2026-06-01T22:00:00.000Z');
  t.equal(byHour.body.to, '2026-06-02T02:00:00.000Z');
  const points = byHour.body.points as Point[];
  const at = (bucket: string, model: string) => points.find((p) => p.bucket === bucket && p.group.model === model);
  t.equal(at('2026-06-01T22:00:00.000Z', 'local/text-mini')?.generations.total, 3, '22:00: three texts');
  t.equal(at('2026-06-01T22:00:00.000Z', 'local/image-fast')?.generations.total, 2, '22:00: two images');
  t.equal(at('2026-06-02T00:00:00.000Z', 'local/text-mini')?.generations.total, 3, '00:00 next day: three texts');
  t.equal(at('2026-06-02T01:00:00.000Z', 'local/text-mini')?.generations.unfinished, 1, '01:00: the job left running');
  t.equal(points.length, 7, 'three hours of two models, and the last hour of one');
  t.ok(
    points.every(
      (p) =>
        p.generations.total === p.generations.succeeded + p.generations.failed + p.generations.cancelled + p.generations.expired + p.generations.unfinished,
    ),
    'each point counts every job once by outcome',
  );
  t.ok(
    points.some((p) => p.tokensIn > 0 && p.tokensOut > 0),
    'texts report their tokens',
  );
  t.same(points.map(lineOf).sort(), await recountSeries(query, ws, 'hour', ['model']), 'by hour and model: equal to a recount');

  // Every combination of groups, by hour and by day, equals the recount; another workspace's jobs never count.
  for (const [grain, groupBy] of [
    ['hour', ['key']],
    ['hour', ['project', 'mode']],
    ['day', []],
    ['day', ['model', 'key', 'project', 'mode']],
  ] as Array<['hour' | 'day', Dimension[]]>) {
    const qs = `workspaceId=${ws}&granularity=${grain}&from=2026-05-30&to=2026-06-03${groupBy.length ? `&groupBy=${groupBy.join(',')}` : ''}`;
    const answer = await get(server, `/v1/usage/series?${qs}`, owner.cookie);
    t.equal(answer.status, 200, JSON.stringify(answer.body));
    t.same((answer.body.points as Point[]).map(lineOf).sort(), await recountSeries(query, ws, grain, groupBy), `${grain} by [${groupBy}]: equal to a recount`);
  }
  const byDay = await get(server, `/v1/usage/series?workspaceId=${ws}&from=2026-06-01&to=2026-06-02`, owner.cookie);
  t.same(
    (byDay.body.points as Point[]).map((p) => [p.bucket, p.generations.total]),
    [
      ['2026-06-01T00:00:00.000Z', 10],
      ['2026-06-02T00:00:00.000Z', 6],
    ],
    'by day: ten jobs on June 1st (22:00, 23:00), six on June 2nd (00:00, 01:00)',
  );

  // Filters, and the totals per group (the breakdown), most credits first.
  const alpha = await get(server, `/v1/usage/series?workspaceId=${ws}&granularity=hour&${range}&project=alpha&groupBy=key`, owner.cookie);
  t.equal(alpha.status, 200, JSON.stringify(alpha.body));
  t.same(
    (alpha.body.points as Point[]).map(lineOf).sort(),
    await recountSeries(query, ws, 'hour', ['key'], "and g.project = 'alpha'"),
    'filtered by project: equal to a recount',
  );
  t.same(
    alpha.body.totals.map((x: Point) => [x.group.key, x.generations.total]),
    [[k1.id, 7]],
    "project alpha: key one's seven texts",
  );
  const byKey = await get(server, `/v1/usage/series?workspaceId=${ws}&groupBy=key&from=2026-06-01&to=2026-06-02`, owner.cookie);
  const credits = (byKey.body.totals as Point[]).map((x) => x.credits);
  t.same(
    credits,
    [...credits].sort((a, b) => b - a),
    'totals: most credits first',
  );
  t.equal(
    (byKey.body.totals as Point[]).reduce((n, x) => n + x.generations.total, 0),
    16,
    'the totals of the keys (and the session) add up to every job',
  );

  // A key reads its own usage only.
  const asKey = await get(server, `/v1/usage/series?workspaceId=${ws}&granularity=hour&${range}&groupBy=key`, k2.key);
  t.equal(asKey.status, 200, JSON.stringify(asKey.body));
  t.equal(asKey.body.apiKeyId, k2.id);
  t.same(
    asKey.body.points.map((p: Point) => p.group.key),
    [k2.id, k2.id, k2.id],
    "key two sees its three hours, nobody else's",
  );
  const refused = await get(server, `/v1/usage/series?workspaceId=${ws}&apiKeyId=${k1.id}`, k2.key);
  t.equal(refused.status, 403, 'a key naming another key is refused');
  t.equal(refused.body.error.code, 'forbidden');
  const foreign = await get(server, `/v1/usage/series?workspaceId=${other.workspaceId}`, owner.cookie);
  t.equal(foreign.status, 404, "another workspace's series answers as a missing one");

  // CSV: by Accept and by format=csv, streamed (chunked), parsed by csv-parse into the JSON's points.
  const all = await get(server, `/v1/usage/series?workspaceId=${ws}&granularity=hour&${range}&groupBy=model,key,project`, owner.cookie);
  for (const how of ['accept', 'format'] as const) {
    const headers = auth(owner.cookie, how === 'accept' ? { accept: 'text/csv' } : {});
    delete headers['content-type'];
    const url = `${server.url}/v1/usage/series?workspaceId=${ws}&granularity=hour&${range}&groupBy=model,key,project${how === 'format' ? '&format=csv' : ''}`;
    const response = await fetch(url, { headers });
    t.equal(response.status, 200, how);
    t.match(response.headers.get('content-type'), /^text\/csv/, `${how}: text/csv`);
    t.equal(response.headers.get('transfer-encoding'), 'chunked', `${how}: streamed`);
    t.match(response.headers.get('content-disposition'), /^attachment; filename="usage-.+\.csv"$/);
    const records = parse(await response.text(), { columns: true }) as Array<Record<string, string>>;
    t.same(
      records.map((r) => ({
        bucket: r.bucket,
        group: { model: r.model, key: r.key, project: r.project },
        figures: [
          r.total,
          r.succeeded,
          r.failed,
          r.cancelled,
          r.expired,
          r.unfinished,
          r.credits,
          r.creditsFromBalance,
          r.costCents,
          r.tokensIn,
          r.tokensOut,
          r.outputBytes,
        ].map(Number),
      })),
      (all.body.points as Point[]).map((p) => ({
        bucket: p.bucket,
        group: { model: p.group.model, key: p.group.key, project: p.group.project },
        figures: JSON.parse(lineOf(p)).slice(2),
      })),
      `${how}: the CSV holds the JSON's points`,
    );
  }

  // What is refused, with the error envelope.
  for (const [qs, why] of [
    ['granularity=hour&from=2026-01-01&to=2026-06-01', 'more hours than allowed'],
    ['groupBy=model,colour', 'an unknown dimension'],
    ['from=2026-06-02&to=2026-06-01', 'from after to'],
    ['granularity=week', 'an unknown granularity'],
    ['from=yesterday', 'a malformed date'],
  ]) {
    const bad = await get(server, `/v1/usage/series?workspaceId=${ws}&${qs}`, owner.cookie);
    t.equal(bad.status, 400, `${why}: 400`);
    t.equal(bad.body.error?.code, 'validation_error', `${why}: validation_error`);
  }
});
