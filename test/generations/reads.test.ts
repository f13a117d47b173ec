import t, { type Test } from 'tap';
import { sharedTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp, uniqueEmail } from '../helpers/identity.ts';
import { newId } from '../../persistence/ids.ts';
import type { GenerationRow } from '../../persistence/entities/generation.ts';
import { authMatrix, generationRow, get, insertGenerations } from './support.ts';

const T0 = Date.UTC(2026, 2, 10, 12, 0, 0);
const MODES = ['text_to_text', 'text_to_image', 'text_to_audio'] as const;
const MODELS = { text_to_text: 'local/text-mini', text_to_image: 'local/image-fast', text_to_audio: 'local/voice' } as const;
const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;

/** Newest first, ties broken by id, as the list orders. */
function newestFirst(rows: GenerationRow[]): string[] {
  return [...rows].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1)).map((row) => row.id);
}

/** Every page of a list, following nextCursor; fails the test on a page larger than the limit. */
async function allPages(t: Test, server: TestServer, path: string, credential: string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const separator = path.includes('?') ? '&' : '?';
    const page = await get(server, `${path}${separator}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, credential);
    t.equal(page.status, 200, `page ${pages + 1} of ${path}`);
    t.ok(page.body.data.length <= limit);
    ids.push(...page.body.data.map((g: { id: string }) => g.id));
    cursor = page.body.nextCursor;
    if (++pages > 100) throw new Error('pagination does not end');
  } while (cursor);
  return ids;
}

/** A workspace with 30 generations spread over modes, statuses, projects and five days. */
async function seeded(_t: Test) {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['generations.read']);
  const rows: GenerationRow[] = [];
  for (let i = 0; i < 30; i++) {
    const mode = MODES[i % 3]!;
    const createdAt = new Date(T0 + Math.floor(i / 6) * 86_400_000 + i * 60_000);
    rows.push(
      generationRow(owner.workspaceId, {
        mode,
        modelId: MODELS[mode],
        status: STATUSES[i % 5]!,
        project: i % 4 === 0 ? 'launch' : i % 4 === 1 ? 'docs' : null,
        createdAt,
        updatedAt: createdAt,
        apiKeyId: i % 2 === 0 ? key.id : null,
      }),
    );
  }
  // Three made in the same millisecond: the id breaks the tie, and pages never split them wrongly.
  const same = new Date(T0 + 2 * 86_400_000 + 30_000);
  for (let i = 0; i < 3; i++) rows.push(generationRow(owner.workspaceId, { createdAt: same, updatedAt: same, project: 'tie' }));
  await insertGenerations(server, rows);
  return { server, owner, key, rows };
}

t.test('the list pages newest first through every row, without duplicates or gaps', async (t) => {
  const { server, key, rows, owner } = await seeded(t);
  const expected = newestFirst(rows);
  for (const limit of [1, 4, 7, 33, 100]) {
    t.same(await allPages(t, server, `/v1/generations?workspaceId=${owner.workspaceId}`, key.key, limit), expected, `limit ${limit}`);
  }
  const first = await get(server, `/v1/generations?workspaceId=${owner.workspaceId}`, key.key);
  t.equal(first.body.data.length, 20, 'default limit 20');
  t.type(first.body.nextCursor, 'string');
  const last = await get(server, `/v1/generations?limit=100&workspaceId=${owner.workspaceId}`, key.key);
  t.equal(last.body.nextCursor, null, 'no cursor after the last page');
});

t.test('rows within one millisecond are paged by their exact time, then id', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['generations.read']);
  // Written with microseconds (as SQL now() would): a cursor cut to milliseconds would skip some of them.
  const ids: string[] = [];
  const micros = ['.123100', '.123900', '.123500', '.123500', '.124000', '.122999'];
  for (const fraction of micros) {
    const id = newId('gen', T0);
    ids.push(id);
    const row = generationRow(owner.workspaceId, { id });
    await server.services.db.em().execute(
      `insert into generations (id, workspace_id, mode, model_id, status, params, inputs, payment_mode, credits, provider, output_asset_ids, timeline, queue_deadline, created_at, updated_at)
       values (?, ?, ?, ?, ?, '{}', '{}', 'credits', 1, 'local', '[]', ?, ?, ?::timestamptz, ?::timestamptz)`,
      [
        id,
        owner.workspaceId,
        row.mode,
        row.modelId,
        row.status,
        JSON.stringify(row.timeline),
        row.queueDeadline,
        `2026-03-10T12:00:00${fraction}Z`,
        `2026-03-10T12:00:00${fraction}Z`,
      ],
    );
  }
  const order = micros
    .map((fraction, i) => ({ fraction, id: ids[i]! }))
    .sort((a, b) => (a.fraction === b.fraction ? (a.id < b.id ? 1 : -1) : a.fraction < b.fraction ? 1 : -1))
    .map((x) => x.id);
  t.same(await allPages(t, server, `/v1/generations?workspaceId=${owner.workspaceId}`, key.key, 1), order);
  t.same(await allPages(t, server, `/v1/generations?workspaceId=${owner.workspaceId}`, key.key, 2), order);
});

t.test('each filter narrows the list, alone and combined, across pages', async (t) => {
  const { server, key, rows, owner } = await seeded(t);
  const cases: Array<[string, (row: GenerationRow) => boolean]> = [
    ['mode=text_to_image', (r) => r.mode === 'text_to_image'],
    ['status=succeeded', (r) => r.status === 'succeeded'],
    ['status=queued', (r) => r.status === 'queued'],
    ['model=local%2Fvoice', (r) => r.modelId === 'local/voice'],
    ['project=launch', (r) => r.project === 'launch'],
    ['project=tie', (r) => r.project === 'tie'],
    ['mode=text_to_text&status=succeeded', (r) => r.mode === 'text_to_text' && r.status === 'succeeded'],
    ['mode=text_to_audio&project=docs', (r) => r.mode === 'text_to_audio' && r.project === 'docs'],
    ['model=local%2Ftext-mini&status=failed&project=launch', (r) => r.modelId === 'local/text-mini' && r.status === 'failed' && r.project === 'launch'],
    ['project=nobody', () => false],
  ];
  for (const [filter, keep] of cases) {
    const expected = newestFirst(rows.filter(keep));
    t.same(await allPages(t, server, `/v1/generations?${filter}&workspaceId=${owner.workspaceId}`, key.key, 2), expected, `${filter}: ${expected.length} rows`);
  }
  const page = await get(server, `/v1/generations?status=running&limit=100&workspaceId=${owner.workspaceId}`, key.key);
  t.ok(page.body.data.length > 0 && page.body.data.every((g: { status: string }) => g.status === 'running'));
});

t.test('from is inclusive and to exclusive; a date-only to includes its whole day', async (t) => {
  const { server, key, rows, owner } = await seeded(t);
  const day = (n: number) => new Date(T0 + n * 86_400_000).toISOString().slice(0, 10);
  const pick = (from: number, to: number) => newestFirst(rows.filter((r) => r.createdAt.getTime() >= from && r.createdAt.getTime() < to));
  const boundary = rows[7]!.createdAt;
  const cases: Array<[string, string[]]> = [
    [`from=${boundary.toISOString()}`, pick(boundary.getTime(), Infinity)],
    [`to=${boundary.toISOString()}`, pick(-Infinity, boundary.getTime())],
    [`from=${day(1)}&to=${day(2)}`, pick(Date.parse(`${day(1)}T00:00:00Z`), Date.parse(`${day(3)}T00:00:00Z`))],
    [`from=${day(3)}`, pick(Date.parse(`${day(3)}T00:00:00Z`), Infinity)],
    [`to=${day(0)}`, pick(-Infinity, Date.parse(`${day(1)}T00:00:00Z`))],
    [`from=${encodeURIComponent('2026-03-11T14:00:00+02:00')}`, pick(Date.parse('2026-03-11T12:00:00Z'), Infinity)],
    [
      `from=${day(2)}&to=${day(2)}&mode=text_to_audio`,
      newestFirst(rows.filter((r) => r.mode === 'text_to_audio' && r.createdAt.toISOString().startsWith(day(2)))),
    ],
  ];
  for (const [filter, expected] of cases) {
    t.ok(expected.length > 0, `${filter} selects something`);
    t.same(await allPages(t, server, `/v1/generations?${filter}&workspaceId=${owner.workspaceId}`, key.key, 3), expected, filter);
  }
  t.ok(pick(boundary.getTime(), Infinity).includes(rows[7]!.id) && !pick(-Infinity, boundary.getTime()).includes(rows[7]!.id));
});

t.test('bad filters and cursors are 400 validation_error naming the field', async (t) => {
  const { server, key, owner } = await seeded(t);
  const cases: Array<[string, RegExp]> = [
    ['status=done', /query\.status: must be one of/],
    ['mode=text_to_smell', /query\.mode: must be one of/],
    ['from=yesterday', /query\.from/],
    ['to=2026-03-10T12:00:00', /query\.to: must be an ISO 8601 date-time with a time zone/],
    ['from=2026-02-30', /query\.from: 2026-02-30 is not a calendar date/],
    ['to=2026-02-30T10:00:00Z', /query\.to: 2026-02-30 is not a calendar date/],
    ['from=2026-03-12&to=2026-03-11', /query\.from: must be before query\.to/],
    ['cursor=garbage', /query\.cursor/],
    [`cursor=${Buffer.from(JSON.stringify(['2026-03-10', 'gen_x'])).toString('base64url')}`, /query\.cursor/],
    ['limit=0', /query\.limit/],
    ['limit=101', /query\.limit/],
    ['colour=red', /unknown field "colour"/],
  ];
  for (const [query, message] of cases) {
    const res = await get(server, `/v1/generations?${query}&workspaceId=${owner.workspaceId}`, key.key);
    t.equal(res.status, 400, query);
    t.equal(res.body.error.code, 'validation_error', query);
    t.match(res.body.error.message, message, query);
  }
});

t.test('the detail has every field of the spec and the timeline; nothing internal leaks; long data URLs are not echoed', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['generations.read']);
  const at = (s: number) => new Date(T0 + s * 1000).toISOString();
  const payload = `data:image/png;base64,${Buffer.alloc(3000, 7).toString('base64')}`;
  const [row] = await insertGenerations(server, [
    generationRow(owner.workspaceId, {
      mode: 'image_to_image',
      modelId: 'local/image-edit',
      status: 'failed',
      apiKeyId: key.id,
      userId: owner.userId,
      credits: 5,
      params: { prompt: 'linocut', strength: 0.6, numImages: 1, aspectRatio: '1:1' },
      inputs: { imageUrls: [payload, 'https://example.com/cat.png', 'data:image/png;base64,iVBO'], imageAssetIds: ['ast_1'], resolved: { secret: true } },
      paymentMode: 'auto',
      project: 'launch',
      idempotencyKey: 'idem-secret',
      providerJobId: 'provider-internal-id',
      errorCode: 'provider_error',
      errorMessage: 'the provider said no',
      startedAt: new Date(at(2)),
      completedAt: new Date(at(3)),
      createdAt: new Date(at(0)),
      updatedAt: new Date(at(3)),
      timeline: [
        { status: 'queued', at: at(0) },
        { status: 'reserved', at: at(1) },
        { status: 'submitted', at: at(1) },
        { status: 'running', at: at(2) },
        { status: 'failed', at: at(3), detail: 'provider_error' },
      ],
    }),
  ]);
  const res = await get(server, `/v1/generations/${row!.id}?workspaceId=${owner.workspaceId}`, key.key);
  t.equal(res.status, 200);
  // The detail read adds why it cost what it cost and where it ran (its own test: generations/explain.test.ts).
  const { price, route, ...detail } = res.body;
  t.match(price, { unit: 'image', termsFrom: 'catalog', counted: { units: 1 } }, 'the price, explained');
  t.match(route, { deploymentId: row!.deploymentId, provider: row!.provider }, 'where it ran');
  t.same(detail, {
    id: row!.id,
    workspaceId: owner.workspaceId,
    apiKeyId: key.id,
    mode: 'image_to_image',
    modelId: 'local/image-edit',
    status: 'failed',
    credits: 5,
    textOutput: null,
    outputAssetIds: [],
    errorCode: 'provider_error',
    errorMessage: 'the provider said no',
    startedAt: at(2),
    completedAt: at(3),
    createdAt: at(0),
    updatedAt: at(3),
    params: { prompt: 'linocut', strength: 0.6, numImages: 1, aspectRatio: '1:1' },
    inputs: {
      imageAssetIds: ['ast_1'],
      imageUrls: [
        `data:image/png;base64,…[${payload.length - 'data:image/png;base64,'.length} characters omitted]`,
        'https://example.com/cat.png',
        'data:image/png;base64,iVBO',
      ],
    },
    paymentMode: 'auto',
    project: 'launch',
    timeline: [
      { status: 'queued', at: at(0), sincePreviousMs: 0 },
      { status: 'reserved', at: at(1), sincePreviousMs: Date.parse(at(1)) - Date.parse(at(0)) },
      { status: 'submitted', at: at(1), sincePreviousMs: 0 },
      { status: 'running', at: at(2), sincePreviousMs: Date.parse(at(2)) - Date.parse(at(1)) },
      { status: 'failed', at: at(3), detail: 'provider_error', sincePreviousMs: Date.parse(at(3)) - Date.parse(at(2)) },
    ],
  });
  const text = JSON.stringify(res.body);
  for (const secret of ['idem-secret', 'provider-internal-id', owner.userId, 'resolved', payload.slice(30, 80)])
    t.notOk(text.includes(secret), `no ${secret.slice(0, 20)}`);

  const listed = await get(server, `/v1/generations?workspaceId=${owner.workspaceId}`, key.key);
  t.equal(listed.body.data.length, 1);
  t.notOk('timeline' in listed.body.data[0], 'lists leave the timeline to the detail');
  const { timeline: _, ...withoutTimeline } = detail;
  t.same(listed.body.data[0], withoutTimeline, 'the list item is the detail without its timeline');

  const succeeded = (
    await insertGenerations(server, [generationRow(owner.workspaceId, { status: 'succeeded', textOutput: 'Hamlet dies.', outputAssetIds: ['ast_a', 'ast_b'] })])
  )[0]!;
  const done = await get(server, `/v1/generations/${succeeded.id}?workspaceId=${owner.workspaceId}`, key.key);
  t.match(done.body, { textOutput: 'Hamlet dies.', outputAssetIds: ['ast_a', 'ast_b'], errorCode: null, errorMessage: null, apiKeyId: null, project: null });
});

t.test("tenant isolation: another workspace's generation is 404 like a missing one, and no list shows it", async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const stranger = await signUp(server);
  const key = await createKey(server, owner.cookie, owner.workspaceId, ['generations.read']);
  const strangerKey = await createKey(server, stranger.cookie, stranger.workspaceId, ['all']);
  const [mine] = await insertGenerations(server, [generationRow(owner.workspaceId, { project: 'shared-name' })]);
  const [theirs] = await insertGenerations(server, [generationRow(stranger.workspaceId, { project: 'shared-name' })]);

  const missing = await get(server, `/v1/generations/${newId('gen')}?workspaceId=${owner.workspaceId}`, key.key);
  t.equal(missing.status, 404);
  t.equal(missing.body.error.code, 'not_found');
  for (const credential of [key.key, owner.cookie]) {
    const other = await get(server, `/v1/generations/${theirs!.id}?workspaceId=${owner.workspaceId}`, credential);
    t.equal(other.status, 404, "another workspace's id");
    t.equal(other.body.error.code, 'not_found');
    t.equal(other.body.error.message, `No generation ${theirs!.id}.`, 'same message shape as a missing one');
    t.notOk(JSON.stringify(other.body).includes(stranger.workspaceId), 'the owner is not revealed');
  }
  t.equal((await get(server, `/v1/generations/${theirs!.id}?workspaceId=${stranger.workspaceId}`, strangerKey.key)).status, 200, 'its own workspace sees it');
  t.equal((await get(server, `/v1/generations/${theirs!.id}`, stranger.cookie)).status, 200, 'and its members');
  t.equal((await get(server, `/v1/generations/${mine!.id}?workspaceId=${owner.workspaceId}`, key.key)).status, 200, 'naming its own workspace is fine');
  t.equal((await get(server, `/v1/generations/${mine!.id}?workspaceId=${stranger.workspaceId}`, key.key)).status, 403, 'a key naming another workspace is 403');
  t.equal(
    (await get(server, `/v1/generations/${mine!.id}?workspaceId=${stranger.workspaceId}`, stranger.cookie)).status,
    404,
    'a session naming the wrong workspace finds nothing',
  );

  const keyList = await get(server, `/v1/generations?project=shared-name&workspaceId=${owner.workspaceId}`, key.key);
  t.same(
    keyList.body.data.map((g: { id: string }) => g.id),
    [mine!.id],
    'a key lists only its workspace',
  );
  const sessionList = await get(server, `/v1/generations?workspaceId=${owner.workspaceId}`, owner.cookie);
  t.same(
    sessionList.body.data.map((g: { id: string }) => g.id),
    [mine!.id],
    'a session lists the workspace it names',
  );
  const foreign = await get(server, `/v1/generations?workspaceId=${stranger.workspaceId}`, owner.cookie);
  t.equal(foreign.status, 404, 'a session naming a workspace it is not in: 404');
  t.equal(foreign.body.error.code, 'not_found');
  const keyForeign = await get(server, `/v1/generations?workspaceId=${stranger.workspaceId}`, key.key);
  t.equal(keyForeign.status, 403, 'a key naming another workspace: 403');
  t.equal(keyForeign.body.error.code, 'forbidden');
  const noWorkspace = await get(server, '/v1/generations', owner.cookie);
  t.equal(noWorkspace.status, 400, 'a session must name the workspace');
  t.match(noWorkspace.body.error.message, /workspaceId/);
  // A cursor from another workspace's list gives nothing of theirs either.
  const strangerPage = await get(server, `/v1/generations?limit=1&workspaceId=${stranger.workspaceId}`, strangerKey.key);
  const crafted = Buffer.from(JSON.stringify(['2999-01-01T00:00:00.000000Z', 'gen_zzzzzzzzzzzzzzzzzzzzzzzzzz'])).toString('base64url');
  const viaCursor = await get(server, `/v1/generations?cursor=${crafted}&workspaceId=${owner.workspaceId}`, key.key);
  t.same(
    viaCursor.body.data.map((g: { id: string }) => g.id),
    [mine!.id],
  );
  t.equal(strangerPage.body.data[0].id, theirs!.id);
});

t.test('scopes and credentials: the auth matrix of the generation reads', async (t) => {
  const server = await sharedTestServer();
  const owner = await signUp(server);
  const other = await signUp(server, { email: uniqueEmail('other') });
  const [row] = await insertGenerations(server, [generationRow(owner.workspaceId)]);
  await authMatrix(t, server, owner, other, { path: '/v1/generations', scopes: ['generations.read'] });
  await authMatrix(t, server, owner, other, { path: `/v1/generations/${row!.id}`, scopes: ['generations.read'] });
  t.equal((await get(server, `/v1/generations?workspaceId=${owner.workspaceId}`, owner.cookie)).status, 200, "a member's session");
  const writeOnly = await createKey(server, owner.cookie, owner.workspaceId, ['generations.write']);
  t.equal((await get(server, `/v1/generations?workspaceId=${owner.workspaceId}`, writeOnly.key)).status, 403, 'generations.write does not grant reads');
});
