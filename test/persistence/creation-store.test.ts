import t from 'tap';
import type { LedgerEntry } from '../../domain/account.ts';
import type { GenerationRow } from '../../persistence/stores/generations/rows.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { generationWritten, writeCreations, type NewCreation } from '../../persistence/stores/workspace/creations.ts';
import { deleteExpiredIdempotencyKeys, readIdempotencyKeys } from '../../persistence/stores/workspace/idempotency.ts';
import { writeMoneyChanges, writeOpeningAccount } from '../../persistence/stores/workspace/money.ts';
import { writeGenerationEnds, type GenerationEnd } from '../../persistence/stores/workspace/settlements.ts';
import { endedAmong, findGeneration, writeProgressRows } from '../../persistence/stores/generations/progress.ts';
import { readGenerationCharge } from '../../persistence/stores/generations/charge.ts';
import * as reads from '../../persistence/stores/generations/reads.ts';
import { jobOfProviderEvent } from '../../persistence/stores/generations/provider-events.ts';
import * as unfinished from '../../persistence/stores/generations/unfinished.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { insertEndpoint, insertWorkspace, storeDatabase } from './store-support.ts';
import { generationRow } from '../generations/support.ts';

/**
 * A job's rows through the workspace actor's stores on a real database (PGlite, or PostgreSQL with
 * TEST_DATABASE_URL): its creation with its reservation and Idempotency-Key (creations.ts), the key read back
 * and purged (idempotency.ts), its moves in flight (generations/progress.ts), its end (settlements.ts) and
 * what explains its cost (generations/charge.ts), the API's reads of it (generations/reads.ts), the job a
 * provider's event names (generations/provider-events.ts) and the unfinished jobs recovery and the queue find
 * (generations/unfinished.ts). No service, no actor: the statements alone.
 */
const { db, query } = await storeDatabase(t);
const AT = new Date('2026-12-01T10:00:00.000Z');
const ms = (n: number) => new Date(AT.getTime() + n);
/** A workspace with an account of 100 credits. */
async function workspace(): Promise<string> {
  const id = await insertWorkspace(query);
  const grant: LedgerEntry = { kind: 'grant', credits: 100, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, reference: 'opening' };
  await writeOpeningAccount(db.em(), id, { reference: 'opening', entries: [grant] }, AT);
  return id;
}
const reserve = (g: GenerationRow): NewCreation['money'] => ({
  workspaceId: g.workspaceId,
  at: g.createdAt,
  entries: [{ kind: 'reserve', credits: -g.credits, reservedCredits: g.credits, walletCents: 0, reservedWalletCents: 0, generationId: g.id }],
});
async function statusOf(id: string) {
  const [row] = await query<{ status: string; credits: number; usage: unknown; text_output: string | null }>(
    'select status, credits, usage, text_output from generations where id = ?',
    [id],
  );
  return row;
}
const end = (g: GenerationRow, more: Partial<GenerationEnd> = {}): GenerationEnd => ({
  id: g.id,
  status: 'succeeded',
  completedAt: ms(5_000).toISOString(),
  updatedAt: ms(5_000),
  textOutput: 'done',
  outputAssetIds: [],
  errorCode: null,
  errorMessage: null,
  timeline: [...g.timeline, { status: 'succeeded', at: ms(5_000).toISOString() }],
  credits: g.credits,
  usage: null,
  charge: null,
  ...more,
});

t.test('writeCreations: the rows, their reservations and their usage in one statement; generationWritten tells', async (t) => {
  const [a, b] = [await workspace(), await workspace()];
  const rows = [
    generationRow(a, { createdAt: AT, credits: 3 }),
    generationRow(a, { createdAt: ms(1), credits: 4, status: 'reserved' }),
    generationRow(b, { createdAt: ms(2), credits: 5 }),
  ];
  t.notOk(await generationWritten(db.em(), rows[0]!.id), 'not yet');
  await writeCreations(
    db.em(),
    rows.map((generation) => ({ generation, money: reserve(generation) })),
  );
  for (const row of rows) t.ok(await generationWritten(db.em(), row.id));
  t.same(await Promise.all(rows.map(async (r) => (await statusOf(r.id))?.status)), ['queued', 'reserved', 'queued']);
  const accounts = await query<{ workspace_id: string; available_credits: number; reserved_credits: number }>(
    'select workspace_id, available_credits, reserved_credits from workspace_accounts where workspace_id in (?, ?) order by workspace_id',
    [a, b],
  );
  t.same(
    accounts.map((x) => [x.workspace_id, Number(x.available_credits), Number(x.reserved_credits)]),
    [
      [a, 93, 7],
      [b, 95, 5],
    ],
  );
  const usage = await query<{ workspace_id: string; total: string }>(
    'select workspace_id, sum(total) as total from usage_rollups where workspace_id in (?, ?) group by 1 order by 1',
    [a, b],
  );
  t.same(
    usage.map((u) => [u.workspace_id, Number(u.total)]),
    [
      [a, 2],
      [b, 1],
    ],
    'each creation counted once in its workspace',
  );
  const series = await query<{ workspace_id: string; total: string }>(
    `select workspace_id, sum(total) as total from usage_series where workspace_id in (?, ?) and grain = 'hour' group by 1 order by 1`,
    [a, b],
  );
  t.same(
    series.map((u) => [u.workspace_id, Number(u.total)]),
    [
      [a, 2],
      [b, 1],
    ],
    'and in its hourly series',
  );
  await writeCreations(db.em(), []);
  t.pass('no creation: nothing to write, and no statement refused');
});

t.test("writeCreations: a creation's key spend rides along", async (t) => {
  const a = await workspace();
  await query(
    `insert into api_keys (id, workspace_id, name, prefix, key_hash, scopes, created_at, updated_at) values (?, ?, 'k', 'gs_live_x', ?, '[]'::jsonb, now(), now())`,
    [`key_${a}`, a, `hash_${a}`],
  );
  const g = generationRow(a, { createdAt: AT, credits: 3, apiKeyId: `key_${a}` });
  await writeCreations(db.em(), [
    {
      generation: g,
      money: reserve(g),
      keySpend: [
        { keyId: `key_${a}`, workspaceId: a, period: 'day', start: '2026-12-01', credits: 3, walletCents: 0 },
        { keyId: `key_${a}`, workspaceId: a, period: 'month', start: '2026-12-01', credits: 3, walletCents: 0 },
      ],
    },
  ]);
  const spend = await query<{ period: string; credits: string }>('select period, credits from api_key_spend where key_id = ? order by period', [`key_${a}`]);
  t.same(
    spend.map((r) => [r.period, Number(r.credits)]),
    [
      ['day', 3],
      ['month', 3],
    ],
  );
});

t.test('writeCreations with an Idempotency-Key: the answer kept is read back while the key lives, dates as dates', async (t) => {
  const a = await workspace();
  const g = generationRow(a, { createdAt: AT, status: 'reserved', startedAt: null, idempotencyKey: 'k1' });
  const answer = { ...g, status: 'queued' as const };
  await writeCreations(db.em(), [{ generation: g, answer, money: reserve(g), idempotency: { key: 'k1', hash: 'h1', expiresAt: ms(60_000) } }]);
  const other = generationRow(a, { createdAt: AT, idempotencyKey: 'k2' });
  await writeCreations(db.em(), [{ generation: other, money: reserve(other), idempotency: { key: 'k2', hash: 'h2', expiresAt: ms(30_000) } }]);

  t.same(
    (await readIdempotencyKeys(openUnit(db), a, ['k2'], AT.getTime())).map((k) => k.key),
    ['k2'],
    'only the keys asked for',
  );
  const read = await readIdempotencyKeys(openUnit(db), a, ['k1', 'k2', 'k3'], AT.getTime());
  const byKey = new Map(read.map((k) => [k.key, k]));
  t.same([...byKey.keys()].sort(), ['k1', 'k2']);
  const k1 = byKey.get('k1')!;
  t.equal(k1.requestHash, 'h1');
  t.equal(k1.responseStatus, 201);
  t.equal(k1.expiresAt, ms(60_000).getTime());
  t.equal(k1.generation.status, 'queued', 'the answer kept is the one given, not the row');
  t.equal(k1.generation.id, g.id);
  t.ok(k1.generation.createdAt instanceof Date && k1.generation.createdAt.getTime() === AT.getTime(), 'createdAt a Date again');
  t.ok(k1.generation.updatedAt instanceof Date && k1.generation.updatedAt.getTime() === AT.getTime(), 'updatedAt a Date again');
  t.ok(k1.generation.queueDeadline instanceof Date && k1.generation.queueDeadline.getTime() === g.queueDeadline!.getTime(), 'queueDeadline a Date again');
  t.equal(k1.generation.startedAt, null, 'a null time stays null');
  t.equal(k1.generation.completedAt, null);
  t.equal(byKey.get('k2')!.generation.status, 'queued', 'without an answer, the row is kept');

  // An answer kept without a time (a field JSON left out) reads as null, not as an invalid date.
  const sparse = generationRow(a, { createdAt: AT, idempotencyKey: 'k-sparse' });
  const { completedAt: _left, ...withoutCompletedAt } = sparse;
  await writeCreations(db.em(), [
    {
      generation: sparse,
      answer: withoutCompletedAt as typeof sparse,
      money: reserve(sparse),
      idempotency: { key: 'k-sparse', hash: 'hs', expiresAt: ms(60_000) },
    },
  ]);
  t.equal((await readIdempotencyKeys(openUnit(db), a, ['k-sparse'], AT.getTime()))[0]!.generation.completedAt, null);

  t.same(
    (await readIdempotencyKeys(openUnit(db), a, ['k1', 'k2'], ms(30_000).getTime())).map((k) => k.key),
    ['k1'],
    'a key expired at `now` is not read',
  );
  t.same(await readIdempotencyKeys(openUnit(db), 'ws_other', ['k1'], AT.getTime()), [], "never another workspace's");

  // Used again before it expired, the key keeps its first answer; after, the new one takes its place.
  const again = generationRow(a, { createdAt: ms(10_000), idempotencyKey: 'k1' });
  await writeCreations(db.em(), [{ generation: again, money: reserve(again), idempotency: { key: 'k1', hash: 'h1-again', expiresAt: ms(90_000) } }]);
  t.equal((await readIdempotencyKeys(openUnit(db), a, ['k1'], AT.getTime()))[0]!.requestHash, 'h1', 'an unexpired key is kept');
  const later = generationRow(a, { createdAt: ms(60_000), idempotencyKey: 'k1' });
  await writeCreations(db.em(), [{ generation: later, money: reserve(later), idempotency: { key: 'k1', hash: 'h1-later', expiresAt: ms(120_000) } }]);
  const replaced = (await readIdempotencyKeys(openUnit(db), a, ['k1'], ms(60_000).getTime()))[0]!;
  t.same([replaced.requestHash, replaced.generation.id], ['h1-later', later.id], 'an expired key is replaced');
});

t.test('deleteExpiredIdempotencyKeys: the keys expired by `before`, page by page, and no other', async (t) => {
  const a = await workspace();
  const keys = ['e1', 'e2', 'e3', 'e4', 'e5', 'live'];
  for (const [i, key] of keys.entries()) {
    const g = generationRow(a, { createdAt: AT, idempotencyKey: key });
    const expiresAt = key === 'live' ? ms(1_000_000) : ms(1_000 + i);
    await writeCreations(db.em(), [{ generation: g, money: reserve(g), idempotency: { key, hash: key, expiresAt } }]);
  }
  const before = ms(1_000_000 - 1);
  const count = async () => Number((await query<{ n: string }>('select count(*) as n from idempotency_keys where workspace_id = ?', [a]))[0]!.n);
  t.equal(await count(), 6);
  t.equal(await deleteExpiredIdempotencyKeys(db, ms(1_001), undefined, 2), 2, 'up to and including `before`');
  t.equal(await count(), 4);
  const gone = await deleteExpiredIdempotencyKeys(db, before, undefined, 2);
  t.ok(gone >= 3, `the rest that expired, in pages of two (${gone}, with other tests' keys)`);
  t.same(
    (await query<{ key: string }>('select key from idempotency_keys where workspace_id = ?', [a])).map((r) => r.key),
    ['live'],
  );

  // Cluster mode: only the keys of workspaces in the shards owned.
  const b = await workspace();
  for (const key of ['s1', 's2']) {
    const g = generationRow(b, { createdAt: AT, idempotencyKey: key });
    await writeCreations(db.em(), [{ generation: g, money: reserve(g), idempotency: { key, hash: key, expiresAt: ms(2_000) } }]);
  }
  const shardCount = 8;
  const home = shardOf(b, shardCount);
  const elsewhere = Array.from({ length: shardCount }, (_, i) => i).filter((i) => i !== home);
  t.equal(await deleteExpiredIdempotencyKeys(db, before, { shards: elsewhere, shardCount }, 10), 0, "another node's shards: none of its keys");
  t.equal(await count(), 1, 'the other workspace untouched');
  t.equal(await deleteExpiredIdempotencyKeys(db, before, { shards: [home], shardCount }, 10), 2, 'its own shard: both');
});

t.test('writeGenerationEnds: each end written once, only over an unfinished job; the usage kept unless given', async (t) => {
  const a = await workspace();
  const [running, finished, withUsage] = [
    generationRow(a, { createdAt: AT, status: 'running' }),
    generationRow(a, { createdAt: ms(1), status: 'reserved' }),
    generationRow(a, { createdAt: ms(2), status: 'submitted' }),
  ];
  await writeCreations(
    db.em(),
    [running, finished, withUsage].map((generation) => ({ generation, money: reserve(generation) })),
  );
  // A creation writes no usage (its provider reports it while the job runs).
  t.equal((await statusOf(running.id))?.usage, null);
  await query(`update generations set usage = '{"inputTokens":1,"outputTokens":2}'::jsonb where id in (?, ?)`, [running.id, withUsage.id]);
  t.same(await writeGenerationEnds(db.em(), [end(finished, { status: 'failed', errorCode: 'provider_error', errorMessage: 'no', textOutput: null })]), [
    { id: finished.id },
  ]);
  const changed = await writeGenerationEnds(db.em(), [
    end(running, { credits: 2 }),
    end(finished, { status: 'succeeded' }),
    end(withUsage, { usage: { inputTokens: 10, outputTokens: 20 }, status: 'cancelled', textOutput: null }),
  ]);
  t.same(changed.map((c) => c.id).sort(), [running.id, withUsage.id].sort(), 'the finished one is not written again');
  t.same(await statusOf(running.id), { status: 'succeeded', credits: 2, usage: { inputTokens: 1, outputTokens: 2 }, text_output: 'done' });
  t.same(await statusOf(finished.id), { status: 'failed', credits: finished.credits, usage: null, text_output: null }, 'its first end stands');
  t.same(await statusOf(withUsage.id), { status: 'cancelled', credits: withUsage.credits, usage: { inputTokens: 10, outputTokens: 20 }, text_output: null });
  const [row] = await query<Record<string, unknown>>(
    `select error_code, error_message, (extract(epoch from completed_at) * 1000)::bigint::text as completed_ms, timeline, output_asset_ids, charge
       from generations where id = ?`,
    [finished.id],
  );
  t.same(row, {
    error_code: 'provider_error',
    error_message: 'no',
    completed_ms: String(ms(5_000).getTime()),
    timeline: [...finished.timeline, { status: 'succeeded', at: ms(5_000).toISOString() }],
    output_asset_ids: [],
    charge: null,
  });
  t.same(await writeGenerationEnds(db.em(), []), [], 'nothing to end');
});

t.test('writeProgressRows: each move only from the status it was decided from; findGeneration and endedAmong read them', async (t) => {
  const [plain, watched] = [await workspace(), await workspace()];
  // An endpoint of `watched` asked for generation.started; of `plain`, one that did not and one deleted that did.
  const endpoint = (id: string, ws: string, types: string[], deleted: boolean) => insertEndpoint(query, ws, id, types, deleted ? { deletedAt: AT } : {});
  await endpoint(`whe_${plain}_1`, plain, ['generation.succeeded'], false);
  await endpoint(`whe_${plain}_2`, plain, ['generation.started'], true);
  await endpoint(`whe_${watched}`, watched, ['generation.started', 'generation.failed'], false);
  const [a, b, c, d] = [
    generationRow(plain, { createdAt: AT, status: 'reserved' }),
    generationRow(watched, { createdAt: ms(1), status: 'reserved' }),
    generationRow(watched, { createdAt: ms(2), status: 'submitted' }),
    generationRow(watched, { createdAt: ms(3), status: 'running' }),
  ];
  await writeCreations(
    db.em(),
    [a, b, c, d].map((generation) => ({ generation, money: reserve(generation) })),
  );
  const move = (g: GenerationRow, status: GenerationRow['status'], more: Partial<GenerationRow> = {}) => ({
    from: g.status,
    row: {
      ...g,
      status,
      timeline: [...g.timeline, { status, at: ms(100).toISOString() }],
      providerJobId: `p-${g.id}`,
      attempts: 1,
      startedAt: status === 'running' ? ms(100) : null,
      updatedAt: ms(100),
      provider: 'fal',
      deploymentId: 'flux-fal',
      ...more,
    },
  });
  const moved = await writeProgressRows(db.em(), [move(a, 'running'), move(b, 'running'), move(c, 'running'), move(d, 'running')]);
  t.same(
    moved.sort((x, y) => (x.id < y.id ? -1 : 1)),
    [
      { id: a.id, startedWanted: false },
      { id: b.id, startedWanted: true },
      { id: c.id, startedWanted: true },
      { id: d.id, startedWanted: false },
    ].sort((x, y) => (x.id < y.id ? -1 : 1)),
    'started wanted: to running, from another status, where an active endpoint that is not deleted asked for it',
  );
  const read = await findGeneration(db, b.id);
  t.same(
    read && [
      read.status,
      read.providerJobId,
      read.attempts,
      read.startedAt?.getTime(),
      read.updatedAt.getTime(),
      read.provider,
      read.deploymentId,
      read.timeline.length,
    ],
    ['running', `p-${b.id}`, 1, ms(100).getTime(), ms(100).getTime(), 'fal', 'flux-fal', 2],
  );
  t.equal(await findGeneration(db, 'gen_missing'), undefined);

  t.same(await writeProgressRows(db.em(), [move(b, 'submitted')]), [], 'decided from `reserved`, but the row is `running` now: not moved');
  t.equal((await findGeneration(db, b.id))?.status, 'running');

  await writeGenerationEnds(db.em(), [end({ ...c, status: 'running' })]);
  t.same(await endedAmong(db.em(), [a.id, c.id, 'gen_missing']), [c.id], 'the ended one only');
  t.same(await endedAmong(db.em(), []), []);
});

t.test("readGenerationCharge: the job's reserve, capture and release entries in order, and its stored charge; by its workspace", async (t) => {
  const a = await workspace();
  const g = generationRow(a, { createdAt: AT, status: 'running', credits: 6 });
  await writeCreations(db.em(), [{ generation: g, money: reserve(g) }]);
  t.same(await readGenerationCharge(openUnit(db), a, g.id).then((r) => [r.charge, r.ledger.map((e) => e.kind)]), [null, ['reserve']]);
  const charge = { exactNano: '5400000000', carryBeforeNano: '100000000', carryAfterNano: '700000000', capped: false };
  await writeGenerationEnds(db.em(), [end(g, { credits: 5, charge })]);
  await writeMoneyChanges(db.em(), [
    {
      workspaceId: a,
      at: ms(5_000),
      entries: [
        { kind: 'capture', credits: 1, reservedCredits: -6, walletCents: 0, reservedWalletCents: 0, generationId: g.id, reference: 'cap' },
        { kind: 'grant', credits: 3, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0, generationId: g.id },
      ],
    },
  ]);
  const { charge: stored, ledger } = await readGenerationCharge(openUnit(db), a, g.id);
  t.same(stored, charge);
  t.same(
    ledger.map(({ id: _id, ...e }) => e),
    [
      { kind: 'reserve', credits: -6, reservedCredits: 6, walletCents: 0, reservedWalletCents: 0, reference: null, createdAt: AT },
      { kind: 'capture', credits: 1, reservedCredits: -6, walletCents: 0, reservedWalletCents: 0, reference: 'cap', createdAt: ms(5_000) },
    ],
    'a grant naming the job is not part of its cost',
  );
  t.same(await readGenerationCharge(openUnit(db), 'ws_other', g.id), { charge: null, ledger: [] }, "never through another workspace's name");
});

t.test("listGenerations: a workspace's jobs newest first, each filter an equality, the time range, the cursor; never another's", async (t) => {
  const [a, other] = [await workspace(), await workspace()];
  const rows = [
    generationRow(a, { createdAt: ms(0), mode: 'text_to_text', status: 'queued', project: 'p1', apiKeyId: null }),
    generationRow(a, { createdAt: ms(1_000), mode: 'text_to_image', modelId: 'acme/flux', status: 'reserved', project: 'p2' }),
    generationRow(a, { createdAt: ms(1_000), mode: 'text_to_text', status: 'queued', project: 'p1' }),
    generationRow(a, { createdAt: ms(2_000), mode: 'text_to_text', status: 'reserved', project: null }),
  ];
  const theirs = generationRow(other, { createdAt: ms(1_500) });
  await writeCreations(
    db.em(),
    [...rows, theirs].map((generation) => ({ generation, money: reserve(generation) })),
  );
  const keyed = generationRow(a, { createdAt: ms(3_000) });
  // A key id on a job (its key row is not needed by the read).
  await writeCreations(db.em(), [{ generation: keyed, money: reserve(keyed) }]);
  await query('update generations set api_key_id = ? where id = ?', ['key_listed', keyed.id]);
  const ids = async (filter: reads.GenerationFilter, page: { after?: [string, string]; limit: number } = { limit: 50 }) =>
    (await reads.listGenerations(openUnit(db), a, filter, page)).map((l) => l.row.id);
  const [r0, r1, r2, r3] = rows.map((r) => r.id);
  const tie = [r1!, r2!].sort().reverse();

  t.same(await ids({}), [keyed.id, r3, ...tie, r0], 'newest first, a tie on the time by id descending');
  t.same(await ids({ mode: 'text_to_image' }), [r1]);
  t.same(await ids({ status: 'queued' }), [keyed.id, r2, r0]);
  t.same(await ids({ model: 'acme/flux' }), [r1]);
  t.same(await ids({ project: 'p1' }), [r2, r0]);
  t.same(await ids({ apiKeyId: 'key_listed' }), [keyed.id]);
  t.same(await ids({ from: ms(1_000).toISOString() }), [keyed.id, r3, ...tie], 'from: at or after');
  t.same(await ids({ to: ms(1_000).toISOString() }), [r0], 'to: before');
  t.same(await ids({ mode: 'text_to_text', project: 'p1', status: 'queued' }), [r2, r0], 'filters together');

  const first = await reads.listGenerations(openUnit(db), a, {}, { limit: 3 });
  t.same(
    first.map((l) => l.row.id),
    [keyed.id, r3, tie[0]],
  );
  t.equal(first[2]!.cursorAt, ms(1_000).toISOString().replace('Z', '000Z'), 'the cursor to the microsecond');
  t.same(await ids({}, { after: [first[2]!.cursorAt, first[2]!.row.id], limit: 50 }), [tie[1], r0], 'the next page, through the tie');

  const listed = first[1]!.row;
  t.ok(listed.createdAt instanceof Date && listed.createdAt.getTime() === ms(2_000).getTime(), 'rows as the ORM maps them');
  t.same(await ids({}, { limit: 0 }), []);

  t.equal(await reads.workspaceOfGeneration(openUnit(db), theirs.id), other);
  t.equal(await reads.workspaceOfGeneration(openUnit(db), 'gen_missing'), undefined);
  t.equal((await reads.findGeneration(openUnit(db), r1!))?.modelId, 'acme/flux');
  t.equal(await reads.findGeneration(openUnit(db), 'gen_missing'), null);
  // Read afresh: past the copy the unit of work already holds.
  const unit = openUnit(db);
  t.equal((await reads.findGeneration(unit, r0!))?.status, 'queued');
  await query(`update generations set status = 'reserved' where id = ?`, [r0]);
  t.equal((await reads.findGeneration(unit, r0!))?.status, 'queued', 'the unit keeps its copy');
  t.equal((await reads.readGenerationAfresh(unit, r0!))?.status, 'reserved', 'read afresh');
  t.equal(await reads.readGenerationAfresh(unit, 'gen_missing'), null);
});

t.test("jobOfProviderEvent: the job in flight under the provider's id on its deployment, or the reserved one under our id not yet written", async (t) => {
  const a = await workspace();
  const [inFlight, reservedJob, written, ended] = [
    generationRow(a, { createdAt: ms(0), status: 'submitted', deploymentId: 'dep-1', providerJobId: 'p-1' }),
    generationRow(a, { createdAt: ms(1), status: 'reserved', deploymentId: 'dep-1', providerJobId: null }),
    generationRow(a, { createdAt: ms(2), status: 'reserved', deploymentId: 'dep-1', providerJobId: 'p-3' }),
    generationRow(a, { createdAt: ms(3), status: 'running', deploymentId: 'dep-1', providerJobId: 'p-4' }),
  ];
  await writeCreations(
    db.em(),
    [inFlight, reservedJob, written, ended].map((generation) => ({ generation, money: reserve(generation) })),
  );
  await writeGenerationEnds(db.em(), [end(ended)]);
  const find = (deployment: string, providerJobId: string, jobId: string) => jobOfProviderEvent(openUnit(db), deployment, providerJobId, jobId);
  t.same(await find('dep-1', 'p-1', 'gen_other'), { id: inFlight.id, workspace_id: a }, 'by the provider job id, submitted');
  t.equal(await find('dep-2', 'p-1', 'gen_other'), undefined, 'never on another deployment');
  t.same(await find('dep-1', 'p-new', reservedJob.id), { id: reservedJob.id, workspace_id: a }, 'reserved, its provider job id not written: by our id');
  t.equal(await find('dep-1', 'p-new', written.id), undefined, 'reserved with a provider job id written: not adopted again');
  t.equal(await find('dep-1', 'p-3', 'gen_other'), undefined, 'a reserved job is not found by a provider job id');
  t.equal(await find('dep-1', 'p-4', ended.id), undefined, 'an ended job is found by neither');
  await query(`update generations set status = 'running' where id = ?`, [inFlight.id]);
  t.same(await find('dep-1', 'p-1', 'gen_other'), { id: inFlight.id, workspace_id: a }, 'running');
  await query(`update generations set status = 'queued' where id = ?`, [reservedJob.id]);
  t.equal(await find('dep-1', 'p-new', reservedJob.id), undefined, 'queued: not yet submitted anywhere');
});

t.test('the unfinished jobs: in flight page by page and by shard, queued by workspace, ended or gone among ids', async (t) => {
  const [a, b] = [await workspace(), await workspace()];
  const mine = new Set([a, b]);
  const rows = [
    generationRow(a, { createdAt: ms(0), status: 'reserved' }),
    generationRow(a, { createdAt: ms(1), status: 'submitted' }),
    generationRow(b, { createdAt: ms(1), status: 'running' }),
    generationRow(b, { createdAt: ms(2), status: 'queued' }),
    generationRow(a, { createdAt: ms(3), status: 'queued' }),
    generationRow(a, { createdAt: ms(4), status: 'queued' }),
    generationRow(a, { createdAt: ms(5), status: 'running' }),
  ];
  await writeCreations(
    db.em(),
    rows.map((generation) => ({ generation, money: reserve(generation), traceContext: { traceparent: `tp-${generation.id}` } })),
  );
  await writeGenerationEnds(db.em(), [end(rows[6]!)]);
  const inFlight = rows.slice(0, 3);
  const order = (list: typeof rows) => [...list].sort((x, y) => x.createdAt.getTime() - y.createdAt.getTime() || (x.id < y.id ? -1 : 1)).map((r) => r.id);

  // Pages through every job in flight; other tests' jobs are there too, so only ours are compared.
  const seen: unfinished.InFlightJob[] = [];
  let after: { createdAt: Date; id: string } | undefined;
  for (;;) {
    const page = await unfinished.jobsInFlightPage(db, undefined, after, 2);
    t.ok(page.length <= 2, 'a page holds at most its limit');
    if (page.length === 0) break;
    seen.push(...page);
    const last = page.at(-1)!.row;
    after = { createdAt: last.createdAt, id: last.id };
  }
  const ours = seen.filter((j) => mine.has(j.row.workspaceId));
  t.same(
    ours.map((j) => j.row.id),
    order(inFlight),
    'reserved, submitted and running, oldest first, each once',
  );
  t.same(ours[0]!.traceContext, { traceparent: `tp-${inFlight[0]!.id}` }, 'with the trace context it was created in');
  t.ok(ours[0]!.row.createdAt instanceof Date, 'rows as the ORM reads them');

  const shardCount = 4;
  for (let shard = 0; shard < shardCount; shard++) {
    const page = await unfinished.jobsInFlightPage(db, { shard, shardCount }, undefined, 1_000);
    t.same(
      page.filter((j) => mine.has(j.row.workspaceId)).map((j) => j.row.id),
      order(inFlight.filter((r) => shardOf(r.workspaceId, shardCount) === shard)),
      `shard ${shard}: its workspaces' jobs only`,
    );
    t.ok(
      page.every((j) => shardOf(j.row.workspaceId, shardCount) === shard),
      `shard ${shard}: no job of another shard`,
    );
  }

  const queued = (await unfinished.queuedByWorkspace(db)).filter((q) => mine.has(q.workspaceId));
  t.same(
    queued.sort((x, y) => (x.workspaceId < y.workspaceId ? -1 : 1)),
    [
      { workspaceId: a, queued: 2 },
      { workspaceId: b, queued: 1 },
    ].sort((x, y) => (x.workspaceId < y.workspaceId ? -1 : 1)),
  );
  const shardOfA = shardOf(a, shardCount);
  t.same(
    (await unfinished.queuedByWorkspace(db, { shard: shardOfA, shardCount }))
      .filter((q) => mine.has(q.workspaceId))
      .map((q) => q.workspaceId)
      .sort(),
    [a, b].filter((w) => shardOf(w, shardCount) === shardOfA).sort(),
    'queued by workspace in one shard',
  );
  const withQueued = await unfinished.workspacesWithQueued(db);
  t.ok(withQueued.includes(a) && withQueued.includes(b), 'both have a queued job');
  t.equal(new Set(withQueued).size, withQueued.length, 'each workspace once');

  // In flight by shard, but the jobs `except`: compared with what the rows say.
  const everyInFlight = seen;
  const counted = (except: string[]) => {
    const expected = new Map<number, number>();
    for (const j of everyInFlight)
      if (!except.includes(j.row.id)) expected.set(shardOf(j.row.workspaceId, shardCount), (expected.get(shardOf(j.row.workspaceId, shardCount)) ?? 0) + 1);
    return expected;
  };
  t.same(await unfinished.jobsInFlightByShardCount(db, shardCount, []), counted([]));
  t.same(
    await unfinished.jobsInFlightByShardCount(db, shardCount, [inFlight[0]!.id, inFlight[2]!.id]),
    counted([inFlight[0]!.id, inFlight[2]!.id]),
    'less the jobs excepted',
  );

  const all = { shards: [0, 1, 2, 3], shardCount };
  t.same(
    (await unfinished.endedOrGoneAmong(db, [rows[6]!.id, inFlight[0]!.id, rows[3]!.id, 'gen_gone'], all)).sort(),
    [rows[6]!.id, 'gen_gone'].sort(),
    'ended or no longer there; unfinished ones are not',
  );
  const shardOfEnded = shardOf(rows[6]!.workspaceId, shardCount);
  t.same(
    await unfinished.endedOrGoneAmong(db, [rows[6]!.id, 'gen_gone'], { shards: [(shardOfEnded + 1) % shardCount], shardCount }),
    ['gen_gone'],
    'an ended job of a shard not owned is not counted as ended here',
  );
});
