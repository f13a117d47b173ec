import t from 'tap';
import type { LedgerEntry } from '../../domain/account.ts';
import { creditBalances, latestLedger, moneyPage } from '../../persistence/stores/money.ts';
import { insertPendingTopUp } from '../../persistence/stores/payments.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { writeMoney, writeMoneyChanges, writeOpeningAccount } from '../../persistence/stores/workspace/money.ts';
import { insertWorkspace, storeDatabase } from './store-support.ts';

/**
 * The money stores on a real database (PGlite, or PostgreSQL with TEST_DATABASE_URL): the workspace actor's
 * writes (persistence/stores/workspace/money.ts) and the API's reads (persistence/stores/money.ts), each
 * checked by what the tables hold after it. No service, no actor: the statements alone.
 */
const { db, query } = await storeDatabase(t);
/** A workspace row (the accounts refer to it), without an account yet. */
const workspace = () => insertWorkspace(query);
async function account(id: string) {
  const [row] = await query<Record<string, unknown>>(
    `select available_credits, reserved_credits, wallet_cents, reserved_wallet_cents, wallet_activated, token_carry_nano,
       to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as updated_at
     from workspace_accounts where workspace_id = ?`,
    [id],
  );
  return row && Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === 'string' && k !== 'updated_at' ? Number(v) : v]));
}
async function ledgerOf(id: string) {
  const rows = await query<Record<string, unknown>>(
    `select id, kind, credits, reserved_credits, wallet_cents, reserved_wallet_cents, generation_id, reference,
       to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at
     from credit_ledger where workspace_id = ? order by created_at, id`,
    [id],
  );
  return rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === 'string' && /credits|cents/.test(k) ? Number(v) : v])));
}
const entry = (kind: LedgerEntry['kind'], credits: number, more: Partial<LedgerEntry> = {}): LedgerEntry => ({
  kind,
  credits,
  reservedCredits: 0,
  walletCents: 0,
  reservedWalletCents: 0,
  ...more,
});
const AT = new Date('2026-12-01T10:00:00.000Z');
const LATER = new Date('2026-12-01T10:00:05.000Z');

t.test('writeOpeningAccount: a zeroed account and its grant; opening twice grants once', async (t) => {
  const id = await workspace();
  const grant = { reference: `opening:${id}`, entries: [entry('grant', 100, { reference: `opening:${id}` })] };
  await writeOpeningAccount(db.em(), id, grant, AT);
  t.same(await account(id), {
    available_credits: 100,
    reserved_credits: 0,
    wallet_cents: 0,
    reserved_wallet_cents: 0,
    wallet_activated: false,
    token_carry_nano: 0,
    updated_at: AT.toISOString(),
  });
  await writeOpeningAccount(db.em(), id, grant, LATER);
  t.equal((await account(id))?.available_credits, 100, 'the second opening grants nothing');
  t.same(
    (await ledgerOf(id)).map((e) => [e.kind, e.credits, e.reference]),
    [['grant', 100, `opening:${id}`]],
    'one grant in the ledger',
  );

  // A grant of another reference is granted: the check is by reference, not by kind alone.
  await writeOpeningAccount(db.em(), id, { reference: 'other', entries: [entry('grant', 5, { reference: 'other' })] }, LATER);
  t.equal((await account(id))?.available_credits, 105);
  // An account that exists is kept as it is (its balances are not reset by a second opening).
  t.equal((await ledgerOf(id)).length, 2);
});

t.test('writeMoney: each balance moves by the sum of the entries, and each entry is written as it was given', async (t) => {
  const id = await workspace();
  await writeOpeningAccount(db.em(), id, { reference: 'g', entries: [entry('grant', 10)] }, AT);
  await writeMoney(
    db.em(),
    id,
    [
      entry('deposit', 0, { walletCents: 1_000, reference: 'dep_1' }),
      entry('reserve', -7, { reservedCredits: 7, walletCents: -300, reservedWalletCents: 300, generationId: 'gen_a' }),
    ],
    LATER,
  );
  t.same(await account(id), {
    available_credits: 3,
    reserved_credits: 7,
    wallet_cents: 700,
    reserved_wallet_cents: 300,
    wallet_activated: false,
    token_carry_nano: 0,
    updated_at: LATER.toISOString(),
  });
  const ledger = (await ledgerOf(id)).slice(1);
  t.match(ledger[0]!.id, /^txn_/, 'ledger ids are txn ids');
  t.same(
    ledger.map(({ id: _id, ...rest }) => rest),
    [
      {
        kind: 'reserve',
        credits: -7,
        reserved_credits: 7,
        wallet_cents: -300,
        reserved_wallet_cents: 300,
        generation_id: 'gen_a',
        reference: null,
        created_at: LATER.toISOString(),
      },
      {
        kind: 'deposit',
        credits: 0,
        reserved_credits: 0,
        wallet_cents: 1_000,
        reserved_wallet_cents: 0,
        generation_id: null,
        reference: 'dep_1',
        created_at: LATER.toISOString(),
      },
    ].sort((a, b) => (a.kind < b.kind ? -1 : 1)),
  );
});

t.test('writeMoneyChanges: many workspaces in one statement, each by its own sum, the latest time and the token carry kept', async (t) => {
  const [a, b] = [await workspace(), await workspace()];
  for (const id of [a, b]) await writeOpeningAccount(db.em(), id, { reference: 'g', entries: [] }, AT);
  await writeMoneyChanges(db.em(), [
    { workspaceId: b, entries: [entry('grant', 10)], at: LATER },
    { workspaceId: a, entries: [entry('grant', 4)], at: AT, tokenCarryNano: -50 },
    { workspaceId: a, entries: [entry('reserve', -3, { reservedCredits: 3 })], at: LATER, tokenCarryNano: 250 },
    { workspaceId: a, entries: [entry('grant', 0)], at: AT },
    { workspaceId: b, entries: [], at: new Date('2027-01-01T00:00:00.000Z'), tokenCarryNano: 999 },
  ]);
  t.same(await account(a), {
    available_credits: 1,
    reserved_credits: 3,
    wallet_cents: 0,
    reserved_wallet_cents: 0,
    wallet_activated: false,
    token_carry_nano: 200,
    updated_at: LATER.toISOString(),
  });
  t.same(
    await account(b),
    {
      available_credits: 10,
      reserved_credits: 0,
      wallet_cents: 0,
      reserved_wallet_cents: 0,
      wallet_activated: false,
      token_carry_nano: 0,
      updated_at: LATER.toISOString(),
    },
    'a change without entries moves nothing, its carry and time included',
  );
  t.same(
    (await ledgerOf(a)).map((e) => [e.kind, e.credits, e.reserved_credits, e.created_at]).sort((x, y) => (`${x[3]}${x[1]}` < `${y[3]}${y[1]}` ? -1 : 1)),
    [
      ['grant', 0, 0, AT.toISOString()],
      ['grant', 4, 0, AT.toISOString()],
      ['reserve', -3, 3, LATER.toISOString()],
    ],
  );
});

t.test('writeMoneyChanges: a workspace without an account fails the statement and writes nothing, the others included', async (t) => {
  const a = await workspace();
  await writeOpeningAccount(db.em(), a, { reference: 'g', entries: [] }, AT);
  await t.rejects(
    db.em().transactional((tx) =>
      writeMoneyChanges(tx, [
        { workspaceId: a, entries: [entry('grant', 1)], at: AT },
        { workspaceId: 'ws_missing_1', entries: [entry('grant', 1)], at: AT },
        { workspaceId: 'ws_missing_2', entries: [entry('grant', 1)], at: AT },
      ]),
    ),
    { code: 'GSW01', message: new RegExp(`no account for some of the workspaces ${a}, ws_missing_1, ws_missing_2$`) },
  );
  await t.rejects(writeMoney(db.em(), 'ws_missing_3', [entry('grant', 1)], AT), {
    code: 'GSW01',
    message: /no account for workspace ws_missing_3$/,
  });
  t.equal((await account(a))?.available_credits, 0, 'the workspace that had an account moved neither');
  t.same(await ledgerOf(a), []);
});

t.test('writeMoneyChanges: the writes alongside ride in the same statement, with or without money', async (t) => {
  const a = await workspace();
  await writeOpeningAccount(db.em(), a, { reference: 'g', entries: [] }, AT);
  const snapshot = (key: string) => ({
    sql: `insert into actor_snapshots (kind, id, version, state, updated_at) values ('money-store', ?, 1, '{}'::jsonb, now())`,
    params: [key],
  });
  await writeMoneyChanges(db.em(), [{ workspaceId: a, entries: [entry('grant', 2)], at: AT }], [snapshot('with-money-1'), snapshot('with-money-2')]);
  await writeMoneyChanges(db.em(), [{ workspaceId: a, entries: [], at: AT }], [snapshot('without-money')]);
  await writeMoneyChanges(db.em(), [], []);
  const rows = await query<{ id: string }>(`select id from actor_snapshots where kind = 'money-store' order by id`);
  t.same(
    rows.map((r) => r.id),
    ['with-money-1', 'with-money-2', 'without-money'],
  );
  t.equal((await account(a))?.available_credits, 2);

  // And they fail with the money: a change for a workspace without an account writes none of them.
  await t.rejects(
    db.em().transactional((tx) => writeMoneyChanges(tx, [{ workspaceId: 'ws_missing', entries: [entry('grant', 1)], at: AT }], [snapshot('lost')])),
  );
  t.same(await query(`select id from actor_snapshots where kind = 'money-store' and id = 'lost'`), []);
});

t.test('creditBalances and latestLedger: a workspace of its own, newest first, twenty at most', async (t) => {
  const [a, other] = [await workspace(), await workspace()];
  t.equal(await creditBalances(openUnit(db), a), undefined, 'no account yet');
  for (const id of [a, other]) await writeOpeningAccount(db.em(), id, { reference: 'g', entries: [] }, AT);
  for (let i = 0; i < 22; i++) await writeMoney(db.em(), a, [entry('grant', i + 1, { reference: `r${i}` })], new Date(AT.getTime() + i * 1_000));
  await writeMoney(db.em(), other, [entry('grant', 1_000)], LATER);
  t.same(await creditBalances(openUnit(db), a), { available_credits: 253, reserved_credits: 0 });
  const latest = await latestLedger(openUnit(db), a);
  t.same(
    latest.map((e) => e.reference),
    Array.from({ length: 20 }, (_, i) => `r${21 - i}`),
  );
});

t.test('moneyPage: newest first by (time, id), after a cursor, filtered, never another workspace', async (t) => {
  const [a, other] = [await workspace(), await workspace()];
  for (const id of [a, other]) await writeOpeningAccount(db.em(), id, { reference: 'g', entries: [] }, AT);
  const times = [0, 1, 1, 2].map((s) => new Date(AT.getTime() + s * 1_000 + 123));
  await writeMoney(db.em(), a, [entry('grant', 1, { reference: 'e0' })], times[0]!);
  await writeMoney(db.em(), a, [entry('deposit', 0, { walletCents: 500, reference: 'e1' }), entry('grant', 2, { reference: 'e2' })], times[1]!);
  await writeMoney(db.em(), a, [entry('reserve', 0, { reservedWalletCents: 10, walletCents: -10, reference: 'e3' })], times[3]!);
  await writeMoney(db.em(), other, [entry('grant', 9, { reference: 'other' })], times[3]!);
  const unit = openUnit(db);

  const all = await moneyPage(unit, 'credit_ledger', a, {}, { limit: 10 });
  t.equal(all.length, 4, 'only the workspace asked for');
  t.equal(all[0]!.reference, 'e3', 'newest first');
  t.equal(all[3]!.reference, 'e0');
  t.same(all[0]!.cursor_at, times[3]!.toISOString().replace('Z', '000Z'), 'the cursor time to the microsecond');
  const [e1OrE2, e2OrE1] = [all[1]!, all[2]!];
  t.ok(e1OrE2.id > e2OrE1.id, 'ties on the time ordered by id, descending');

  const first = await moneyPage(unit, 'credit_ledger', a, {}, { limit: 2 });
  t.same(
    first.map((e) => e.id),
    all.slice(0, 2).map((e) => e.id),
    'a limit',
  );
  const last = first.at(-1)!;
  const next = await moneyPage(unit, 'credit_ledger', a, {}, { after: [last.cursor_at, last.id], limit: 10 });
  t.same(
    next.map((e) => e.id),
    all.slice(2).map((e) => e.id),
    'the next page starts after the cursor, through a tie on the time',
  );

  const wallet = await moneyPage(unit, 'credit_ledger', a, { walletOnly: true }, { limit: 10 });
  t.same(
    wallet.map((e) => e.reference),
    ['e3', 'e1'],
    'walletOnly: the entries that move wallet cents, reserved or not',
  );

  await insertPendingTopUp(unit, { id: 'top_1', workspaceId: a, credits: 10, amountCents: 500, paymentId: 'pay_1', at: times[0]! });
  await insertPendingTopUp(unit, { id: 'top_2', workspaceId: a, credits: 20, amountCents: 900, paymentId: 'pay_2', at: times[1]! });
  await query(`update credit_top_ups set status = 'paid' where id = 'top_2'`);
  t.same(
    (await moneyPage(unit, 'credit_top_ups', a, { status: 'pending' }, { limit: 10 })).map((r) => r.id),
    ['top_1'],
    'status',
  );
  t.same(
    (await moneyPage(unit, 'credit_top_ups', a, {}, { limit: 10 })).map((r) => r.id),
    ['top_2', 'top_1'],
  );
});
