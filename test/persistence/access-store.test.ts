import t from 'tap';
import * as keys from '../../persistence/stores/keys.ts';
import { readSwitch, writeSwitch } from '../../persistence/stores/switches.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { insertWorkspace, storeDatabase } from './store-support.ts';

/**
 * The stores of access on a real database (PGlite, or PostgreSQL with TEST_DATABASE_URL): API keys as the
 * API and the authentication read and write them (persistence/stores/keys.ts: rows, the record a request is
 * checked against, their use per day), and the operator's switches (persistence/stores/switches.ts). No
 * service: the statements alone.
 */
const { db, query } = await storeDatabase(t);
const AT = new Date('2026-12-01T10:00:00.000Z');
const ms = (n: number) => new Date(AT.getTime() + n);
const workspace = (plan = 'free') => insertWorkspace(query, plan);
const key = (id: string, workspaceId: string, createdAt: Date, more: Partial<keys.ApiKey> = {}): keys.ApiKey => ({
  id,
  workspaceId,
  createdBy: null,
  name: `key ${id}`,
  prefix: 'gs_live_abcd',
  keyHash: `hash-${id}`,
  scopes: ['generations.read'],
  expiresAt: null,
  revokedAt: null,
  lastUsedAt: null,
  creditBudget: null,
  walletSpendCapCents: null,
  budgetPeriod: 'month',
  maxConcurrentGenerations: null,
  allowedModels: null,
  createdAt,
  updatedAt: createdAt,
  ...more,
});

t.test('keys: made, found, listed newest first by workspace, changed, revoked once', async (t) => {
  const [a, other] = [await workspace('pro'), await workspace()];
  const ids = [1, 2, 3].map((n) => `key_${a}_${n}`);
  // Made out of order, so that the pages' order is the statement's, not the rows' place in the table.
  await keys.insertKey(openUnit(db), key(ids[1]!, a, ms(1_000)));
  await keys.insertKey(openUnit(db), key(ids[0]!, a, ms(0), { expiresAt: ms(86_400_000), scopes: ['generations.read', 'generations.write'] }));
  await keys.insertKey(openUnit(db), key(ids[2]!, a, ms(1_000)));
  await keys.insertKey(openUnit(db), key(`key_${other}`, other, ms(5_000)));
  t.same(await keys.findKey(openUnit(db), ids[0]!), key(ids[0]!, a, ms(0), { expiresAt: ms(86_400_000), scopes: ['generations.read', 'generations.write'] }));
  t.equal(await keys.findKey(openUnit(db), 'key_missing'), null);

  const page = async (after?: [Date, string], limit = 10) => (await keys.listKeys(openUnit(db), a, { after, limit })).map((k) => k.id);
  const tie = [ids[1]!, ids[2]!].sort().reverse();
  t.same(await page(), [...tie, ids[0]], "newest first, a tie by id descending, never another workspace's");
  t.same(await page(undefined, 2), tie);
  t.same(await page([ms(1_000), tie[0]!]), [tie[1], ids[0]], 'after a cursor, through the tie');

  await keys.updateKeyRow(openUnit(db), ids[1]!, { name: 'renamed', creditBudget: 50, updatedAt: ms(2_000) });
  const changed = (await keys.findKey(openUnit(db), ids[1]!))!;
  t.same(
    [changed.name, changed.creditBudget, changed.updatedAt.getTime(), changed.scopes],
    ['renamed', 50, ms(2_000).getTime(), ['generations.read']],
    'only what changed',
  );
  t.same(
    [(await keys.findKey(openUnit(db), ids[0]!))?.name, (await keys.findKey(openUnit(db), `key_${other}`))?.name],
    [`key ${ids[0]}`, `key key_${other}`],
    'and only that key',
  );

  await keys.revokeKey(openUnit(db), ids[1]!, ms(3_000));
  await keys.revokeKey(openUnit(db), ids[1]!, ms(4_000));
  const revoked = (await keys.findKey(openUnit(db), ids[1]!))!;
  t.same([revoked.revokedAt?.getTime(), revoked.updatedAt.getTime()], [ms(3_000).getTime(), ms(3_000).getTime()], 'revoked twice: the first time stands');
});

t.test("the record a request is checked against: by the key's hash, with its workspace's plan", async (t) => {
  const a = await workspace('team');
  await keys.insertKey(openUnit(db), key(`key_${a}`, a, AT, { keyHash: `h-${a}`, expiresAt: ms(60_000), revokedAt: ms(30_000), scopes: ['assets.read'] }));
  await keys.insertKey(openUnit(db), key(`key_${a}_2`, a, AT, { keyHash: `h2-${a}` }));
  const found = (await keys.findKeyByHash(openUnit(db), `h-${a}`))!;
  t.same([found.id, found.workspace_id, found.scopes, found.plan], [`key_${a}`, a, ['assets.read'], 'team']);
  t.equal(new Date(found.expires_at!).getTime(), ms(60_000).getTime());
  t.equal(new Date(found.revoked_at!).getTime(), ms(30_000).getTime());
  t.equal(await keys.findKeyByHash(openUnit(db), 'h-none'), undefined);
  t.equal(await keys.workspaceOfKeyHash(openUnit(db), `h2-${a}`), a);
  t.equal(await keys.workspaceOfKeyHash(openUnit(db), 'h-none'), undefined);
  t.same((await keys.keyHashesOf(openUnit(db), a)).sort(), [`h-${a}`, `h2-${a}`].sort());
  t.same(await keys.keyHashesOf(openUnit(db), 'ws_none'), []);
});

t.test('key use: requests per day added up, last use moved a minute at least, a key gone skipped; the days read back', async (t) => {
  const a = await workspace();
  const [k1, k2] = [`key_${a}_1`, `key_${a}_2`];
  for (const id of [k1, k2]) await keys.insertKey(openUnit(db), key(id, a, AT));
  await keys.addKeyUsage(
    openUnit(db),
    [
      [k1, '2026-12-01', 3],
      [k1, '2026-12-02', 1],
      [k2, '2026-12-01', 2],
      ['key_gone', '2026-12-01', 9],
    ],
    [
      [k1, ms(0).getTime()],
      ['key_gone', ms(0).getTime()],
    ],
  );
  await keys.addKeyUsage(openUnit(db), [[k1, '2026-12-01', 4]], [[k1, ms(30_000).getTime()]]);
  t.same(await keys.keyRequestsByDay(openUnit(db), k1, '2026-12-01', '2026-12-31').then((rows) => rows.map((r) => [r.day, Number(r.n)]).sort()), [
    ['2026-12-01', 7],
    ['2026-12-02', 1],
  ]);
  t.same(
    await keys.keyRequestsByDay(openUnit(db), k1, '2026-12-02', '2026-12-02').then((rows) => rows.map((r) => [r.day, Number(r.n)])),
    [['2026-12-02', 1]],
    'both days included, none outside',
  );
  t.same(await keys.keyRequestsByDay(openUnit(db), k2, '2026-12-01', '2026-12-01').then((rows) => rows.map((r) => Number(r.n))), [2]);
  t.equal((await keys.findKey(openUnit(db), k1))?.lastUsedAt?.getTime(), ms(0).getTime(), 'a use 30 s later does not move it');
  await keys.addKeyUsage(openUnit(db), [], [[k1, ms(60_000).getTime()]]);
  t.equal((await keys.findKey(openUnit(db), k1))?.lastUsedAt?.getTime(), ms(60_000).getTime(), 'a minute later does');
  t.equal((await keys.findKey(openUnit(db), k2))?.lastUsedAt, null);

  // Many at once, one count per key and day as the caller gathers them (http/auth/key-usage.ts): past one statement's rows (500).
  const dayOf = (i: number) => new Date(Date.UTC(2027, 0, 1) + i * 86_400_000).toISOString().slice(0, 10);
  const many = Array.from({ length: 501 }, (_, i) => [k2, dayOf(i), 1] as const);
  await keys.addKeyUsage(openUnit(db), many, []);
  const spread = await keys.keyRequestsByDay(openUnit(db), k2, dayOf(0), dayOf(500));
  t.same([spread.length, spread.reduce((sum, r) => sum + Number(r.n), 0)], [501, 501], 'every count of a large batch added');

  await query(`insert into usage_rollups (workspace_id, day, api_key_id, total) values (?, '2026-12-01', ?, 5), (?, '2026-12-02', ?, 0)`, [a, k1, a, k1]);
  t.same(
    (await keys.keyGenerationsByDay(openUnit(db), a, k1, '2026-12-01', '2026-12-31')).map((r) => [r.day, Number(r.n)]),
    [['2026-12-01', 5]],
    'generations per day from the rollups, days with none left out',
  );
  t.same(await keys.keyGenerationsByDay(openUnit(db), 'ws_other', k1, '2026-12-01', '2026-12-31'), [], "never through another workspace's name");
});

t.test('switches: unset until set; setting the value it has keeps the time it changed, with the new reason', async (t) => {
  t.equal(await readSwitch(db, 'store-test'), undefined);
  const set = await writeSwitch(db, 'store-test', true, 'incident 1', AT);
  t.same([set?.enabled, set?.reason, new Date(set!.changed_at).getTime()], [true, 'incident 1', AT.getTime()]);
  const again = await writeSwitch(db, 'store-test', true, 'still incident 1', ms(5_000));
  t.same([again?.enabled, again?.reason, new Date(again!.changed_at).getTime()], [true, 'still incident 1', AT.getTime()], 'the same value: its time kept');
  const off = await writeSwitch(db, 'store-test', false, null, ms(9_000));
  t.same([off?.enabled, off?.reason, new Date(off!.changed_at).getTime()], [false, null, ms(9_000).getTime()], 'a change: the new time');
  const read = await readSwitch(db, 'store-test');
  t.same([read?.enabled, read?.reason, new Date(read!.changed_at).getTime()], [false, null, ms(9_000).getTime()]);
  t.equal(await readSwitch(db, 'another'), undefined, 'one row per switch');
});
