import t from 'tap';
import type { KeyLimits, KeySpendDelta } from '../../domain/key-limits.ts';
import { openDatabase } from '../../persistence/database.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { keySpendWrite, readKeySpends, readWorkspaceKeySpends, writeKeyLimits } from '../../persistence/stores/workspace/keys.ts';
import { writeMoneyChanges } from '../../persistence/stores/workspace/money.ts';
import { freshDatabaseUrl, migratedPglite } from '../helpers/database.ts';

/**
 * API keys' spending controls in the workspace actor's store (persistence/stores/workspace/keys.ts) on a real
 * database (PGlite, or PostgreSQL with TEST_DATABASE_URL): the spend rows' changes riding in the money's
 * statement, the limits and the current day's and month's spend read back, a change of limits written.
 */
const fresh = await freshDatabaseUrl();
const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test', pglite: fresh.url === 'memory://' ? await migratedPglite() : undefined });
t.teardown(async () => {
  await db.close();
  await fresh.drop();
});

const query = <R>(sql: string, params: unknown[] = []) => db.em().execute<R[]>(sql, params);
const NOW = Date.parse('2026-12-15T10:00:00.000Z');
const DAY = '2026-12-15';
const MONTH = '2026-12-01';
let count = 0;
/** A workspace with an account and a key of its own, without limits. */
async function workspaceWithKey(): Promise<{ workspaceId: string; keyId: string }> {
  const n = ++count;
  const workspaceId = `ws_key_store_${n}`;
  const keyId = `key_store_${n}`;
  await query('insert into workspaces (id, name, plan, personal, created_at, updated_at) values (?, ?, ?, false, now(), now())', [
    workspaceId,
    workspaceId,
    'free',
  ]);
  await query(
    `insert into workspace_accounts (workspace_id, available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, updated_at)
       values (?, 0, 0, 0, 0, false, now())`,
    [workspaceId],
  );
  await query(
    `insert into api_keys (id, workspace_id, name, prefix, key_hash, scopes, created_at, updated_at) values (?, ?, 'k', 'gs_live_x', ?, '[]'::jsonb, now(), now())`,
    [keyId, workspaceId, `hash-${n}`],
  );
  return { workspaceId, keyId };
}
const delta = (keyId: string, workspaceId: string, period: 'day' | 'month', start: string, credits: number, walletCents = 0): KeySpendDelta => ({
  keyId,
  workspaceId,
  period,
  start,
  credits,
  walletCents,
});
/** The spend rows' changes written as the creations write them: riding in the money's statement. */
async function writeSpend(deltas: KeySpendDelta[]): Promise<void> {
  const write = keySpendWrite(deltas);
  await writeMoneyChanges(db.em(), [], write ? [write] : []);
}

t.test('keySpendWrite: nothing to write for no change, or changes that sum to none', async (t) => {
  t.equal(keySpendWrite([]), undefined);
  t.equal(keySpendWrite([delta('key_a', 'ws_a', 'day', DAY, 3, 100), delta('key_a', 'ws_a', 'day', DAY, -3, -100)]), undefined);
  const write = keySpendWrite([delta('key_a', 'ws_a', 'day', DAY, 3, 0), delta('key_a', 'ws_a', 'day', DAY, -3, 5)])!;
  t.same(
    JSON.parse(write.params[0] as string),
    [{ key_id: 'key_a', workspace_id: 'ws_a', period: 'day', period_start: DAY, credits: 0, wallet_cents: 5 }],
    'wallet cents alone are a change',
  );
  const sorted = keySpendWrite([delta('key_b', 'ws_a', 'day', DAY, 1), delta('key_a', 'ws_a', 'month', MONTH, 1), delta('key_a', 'ws_a', 'day', DAY, 1)])!;
  t.same(
    (JSON.parse(sorted.params[0] as string) as Array<{ key_id: string; period: string }>).map((r) => [r.key_id, r.period]),
    [
      ['key_a', 'day'],
      ['key_a', 'month'],
      ['key_b', 'day'],
    ],
    'one row per key, period and start, in a fixed order',
  );
});

t.test('the spend rows move by the sum of their changes; readKeySpends reads the current day and month', async (t) => {
  const { workspaceId, keyId } = await workspaceWithKey();
  await writeSpend([
    delta(keyId, workspaceId, 'day', DAY, 3, 10),
    delta(keyId, workspaceId, 'day', DAY, 4, 20),
    delta(keyId, workspaceId, 'month', MONTH, 7, 30),
    delta(keyId, workspaceId, 'day', '2026-12-14', 50, 500),
    delta(keyId, workspaceId, 'month', '2026-11-01', 60, 600),
  ]);
  await writeSpend([delta(keyId, workspaceId, 'day', DAY, -1, -5)]);
  const spends = await readKeySpends(openUnit(db), new Map([[keyId, workspaceId]]), NOW);
  t.same(spends.get(keyId), {
    limits: { creditBudget: null, walletSpendCapCents: null, period: 'month', maxConcurrentGenerations: null, allowedModels: null },
    day: { start: DAY, credits: 6, walletCents: 25 },
    month: { start: MONTH, credits: 7, walletCents: 30 },
    unfinished: 0,
  });

  const nextMonth = Date.parse('2027-01-02T00:00:00.000Z');
  t.same(
    (await readKeySpends(openUnit(db), new Map([[keyId, workspaceId]]), nextMonth)).get(keyId),
    {
      limits: { creditBudget: null, walletSpendCapCents: null, period: 'month', maxConcurrentGenerations: null, allowedModels: null },
      day: { start: '2027-01-02', credits: 0, walletCents: 0 },
      month: { start: '2027-01-01', credits: 0, walletCents: 0 },
      unfinished: 0,
    },
    'a new day and month start at nothing',
  );
});

t.test('readKeySpends: a key of another workspace, or none, is not found; several keys in two statements', async (t) => {
  const a = await workspaceWithKey();
  const b = await workspaceWithKey();
  t.same(await readKeySpends(openUnit(db), new Map(), NOW), new Map(), 'none asked');
  t.same([...(await readKeySpends(openUnit(db), new Map([[a.keyId, b.workspaceId]]), NOW)).keys()], [], "a key asked for in another workspace's name");
  t.same([...(await readKeySpends(openUnit(db), new Map([['key_missing', a.workspaceId]]), NOW)).keys()], [], 'a key that is not there');
  await writeSpend([delta(a.keyId, a.workspaceId, 'day', DAY, 2), delta(b.keyId, b.workspaceId, 'month', MONTH, 9)]);
  const both = await readKeySpends(
    openUnit(db),
    new Map([
      [a.keyId, a.workspaceId],
      [b.keyId, b.workspaceId],
    ]),
    NOW,
  );
  t.same(
    [...both.entries()].map(([id, s]) => [id, s.day.credits, s.month.credits]).sort(),
    [
      [a.keyId, 2, 0],
      [b.keyId, 0, 9],
    ].sort(),
  );
  t.same(
    [...(await readWorkspaceKeySpends(openUnit(db), a.workspaceId, [a.keyId, b.keyId], NOW)).keys()],
    [a.keyId],
    'readWorkspaceKeySpends: its own keys only',
  );
});

t.test("writeKeyLimits: the key's controls written, read back as they were set; never another workspace's key", async (t) => {
  const { workspaceId, keyId } = await workspaceWithKey();
  const other = await workspaceWithKey();
  const limits: KeyLimits = { creditBudget: 40, walletSpendCapCents: 250, period: 'day', maxConcurrentGenerations: 3, allowedModels: ['acme/a', 'acme/b'] };
  await writeKeyLimits(db.em(), workspaceId, keyId, limits, new Date(NOW));
  t.same((await readKeySpends(openUnit(db), new Map([[keyId, workspaceId]]), NOW)).get(keyId)?.limits, limits);
  await writeKeyLimits(
    db.em(),
    workspaceId,
    keyId,
    { creditBudget: null, walletSpendCapCents: null, period: 'month', maxConcurrentGenerations: null, allowedModels: null },
    new Date(NOW),
  );
  t.same((await readKeySpends(openUnit(db), new Map([[keyId, workspaceId]]), NOW)).get(keyId)?.limits, {
    creditBudget: null,
    walletSpendCapCents: null,
    period: 'month',
    maxConcurrentGenerations: null,
    allowedModels: null,
  });
  const [updated] = await query<{ updated_at: string }>(
    `select to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as updated_at from api_keys where id = ?`,
    [keyId],
  );
  t.equal(updated?.updated_at, new Date(NOW).toISOString());

  await writeKeyLimits(db.em(), workspaceId, other.keyId, limits, new Date(NOW));
  t.same(
    (await readKeySpends(openUnit(db), new Map([[other.keyId, other.workspaceId]]), NOW)).get(other.keyId)?.limits.creditBudget,
    null,
    'a key of another workspace is left as it was',
  );
});
