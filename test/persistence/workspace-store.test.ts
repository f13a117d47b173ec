import t from 'tap';
import type { KeyLimits, KeySpendDelta } from '../../domain/key-limits.ts';
import { openUnit } from '../../persistence/stores/unit.ts';
import { keySpendWrite, readKeySpends, readWorkspaceKeySpends, writeKeyLimits } from '../../persistence/stores/workspace/keys.ts';
import { readWorkspaces } from '../../persistence/stores/workspace/load.ts';
import { writeMoney, writeMoneyChanges } from '../../persistence/stores/workspace/money.ts';
import { writeCreations } from '../../persistence/stores/workspace/creations.ts';
import { writeGenerationEnds } from '../../persistence/stores/workspace/settlements.ts';
import { generationRow } from '../generations/support.ts';
import { insertWorkspace, storeDatabase } from './store-support.ts';

/**
 * The workspace actor's stores of its keys and its making, on a real database (PGlite, or PostgreSQL with
 * TEST_DATABASE_URL): API keys' spending controls (persistence/stores/workspace/keys.ts: the spend rows'
 * changes riding in the money's statement, the limits and the current day's and month's spend read back, a
 * change of limits written) and what a workspace actor is made from (workspace/load.ts).
 */
const { db, query } = await storeDatabase(t);
const NOW = Date.parse('2026-12-15T10:00:00.000Z');
const DAY = '2026-12-15';
const MONTH = '2026-12-01';
let count = 0;
/** A workspace with an account and a key of its own, without limits. */
async function workspaceWithKey(): Promise<{ workspaceId: string; keyId: string }> {
  const n = ++count;
  const workspaceId = await insertWorkspace(query);
  const keyId = `key_store_${n}`;
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
  const [cleared] = await query<{ none: boolean }>('select allowed_models is null as none from api_keys where id = ?', [keyId]);
  t.equal(cleared?.none, true, 'no model list is SQL NULL, not a JSON null');
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

t.test("readWorkspaces: plan, account, unfinished jobs with their reservations, their keys and the month's wallet spend, of many at once", async (t) => {
  t.same(await readWorkspaces(openUnit(db), [], NOW), new Map(), 'none asked');
  const a = await workspaceWithKey();
  const b = await workspaceWithKey();
  await query(`update workspaces set plan = 'pro' where id = ?`, [b.workspaceId]);
  await query(
    `update workspace_accounts set wallet_activated = true, auto_recharge_enabled = true, auto_recharge_threshold_cents = 500,
       auto_recharge_amount_cents = 2000, monthly_spend_cap_cents = 9000 where workspace_id = ?`,
    [a.workspaceId],
  );
  await writeMoney(
    db.em(),
    a.workspaceId,
    [
      { kind: 'grant', credits: 50, reservedCredits: 0, walletCents: 0, reservedWalletCents: 0 },
      { kind: 'deposit', credits: 0, reservedCredits: 0, walletCents: 5_000, reservedWalletCents: 0 },
    ],
    new Date('2026-11-20T00:00:00.000Z'),
  );
  const at = (iso: string) => new Date(iso);
  const reserveOf = (g: ReturnType<typeof generationRow>, walletCents = 0) => ({
    workspaceId: g.workspaceId,
    at: g.createdAt,
    entries: [
      {
        kind: 'reserve' as const,
        credits: walletCents ? 0 : -g.credits,
        reservedCredits: walletCents ? 0 : g.credits,
        walletCents: -walletCents,
        reservedWalletCents: walletCents,
        generationId: g.id,
      },
    ],
  });
  const queued = generationRow(a.workspaceId, { createdAt: at('2026-12-15T09:00:00.000Z'), credits: 4, apiKeyId: a.keyId });
  const running = generationRow(a.workspaceId, {
    createdAt: at('2026-12-15T09:00:01.000Z'),
    credits: 3,
    status: 'running',
    provider: 'fal',
    deploymentId: 'flux-fal',
    paymentMode: 'wallet',
  });
  const ended = generationRow(a.workspaceId, { createdAt: at('2026-12-15T09:00:02.000Z'), credits: 2, status: 'running' });
  const lastMonth = generationRow(a.workspaceId, { createdAt: at('2026-11-30T23:59:59.000Z'), credits: 1, status: 'running', paymentMode: 'wallet' });
  await writeCreations(db.em(), [
    { generation: queued, money: reserveOf(queued), traceContext: { traceparent: '00-abc-def-01' } },
    { generation: running, money: reserveOf(running, 300), traceContext: { traceparent: '00-run-def-01' } },
    { generation: ended, money: reserveOf(ended) },
    { generation: lastMonth, money: reserveOf(lastMonth, 700) },
  ]);
  await writeGenerationEnds(db.em(), [
    {
      id: ended.id,
      status: 'succeeded',
      completedAt: at('2026-12-15T09:10:00.000Z').toISOString(),
      updatedAt: at('2026-12-15T09:10:00.000Z'),
      textOutput: null,
      outputAssetIds: [],
      errorCode: null,
      errorMessage: null,
      timeline: ended.timeline,
      credits: 2,
      usage: null,
      charge: null,
    },
  ]);
  // A release of part of a wallet reservation this month: the month's spend is what was reserved less what came back.
  await writeMoney(
    db.em(),
    a.workspaceId,
    [{ kind: 'release', credits: 0, reservedCredits: 0, walletCents: 100, reservedWalletCents: -100, generationId: running.id }],
    at('2026-12-15T09:20:00.000Z'),
  );
  await writeSpend([delta(a.keyId, a.workspaceId, 'month', MONTH, 4)]);

  const records = await readWorkspaces(openUnit(db), [a.workspaceId, b.workspaceId, 'ws_none'], NOW);
  t.same([...records.keys()].sort(), [a.workspaceId, b.workspaceId, 'ws_none'].sort(), 'one record per workspace asked for');

  const none = records.get('ws_none')!;
  t.same(
    [none.exists, none.plan, none.account, none.open, none.keys.size, none.walletSpentCents, none.now],
    [false, null, undefined, [], 0, 0, NOW],
    'a workspace without a row: nothing of its own',
  );
  const rb = records.get(b.workspaceId)!;
  t.same([rb.exists, rb.plan, rb.open, rb.keys.size, rb.walletSpentCents], [true, 'pro', [], 0, 0]);
  t.equal(Number(rb.account?.available_credits), 0);

  const ra = records.get(a.workspaceId)!;
  t.same([ra.exists, ra.plan], [true, 'free']);
  const account = ra.account!;
  t.same(
    [
      account.has_account,
      account.wallet_activated,
      account.auto_recharge_enabled,
      Number(account.auto_recharge_threshold_cents),
      Number(account.auto_recharge_amount_cents),
      Number(account.monthly_spend_cap_cents),
      Number(account.available_credits),
      Number(account.reserved_credits),
      Number(account.wallet_cents),
      Number(account.reserved_wallet_cents),
      Number(account.token_carry_nano),
    ],
    [true, true, true, 500, 2_000, 9_000, 50 - 4 - 2 + 0, 4 + 2 - 0, 5_000 - 300 - 700 + 100, 300 + 700 - 100, 0],
  );
  t.same(
    ra.open.map((j) => [
      j.id,
      j.workspace_id,
      j.status,
      j.provider,
      j.deployment_id,
      new Date(j.queue_deadline).getTime(),
      Number(j.reserved_credits),
      Number(j.reserved_wallet_cents),
      j.api_key_id,
      new Date(j.created_at).getTime(),
      Number(j.credits),
      j.trace_context,
    ]),
    [
      [
        lastMonth.id,
        a.workspaceId,
        'running',
        'local',
        'local-text-mini',
        lastMonth.queueDeadline!.getTime(),
        0,
        700,
        null,
        lastMonth.createdAt.getTime(),
        1,
        null,
      ],
      [
        queued.id,
        a.workspaceId,
        'queued',
        'local',
        'local-text-mini',
        queued.queueDeadline!.getTime(),
        4,
        0,
        a.keyId,
        queued.createdAt.getTime(),
        4,
        { traceparent: '00-abc-def-01' },
      ],
      [running.id, a.workspaceId, 'running', 'fal', 'flux-fal', running.queueDeadline!.getTime(), 0, 300, null, running.createdAt.getTime(), 3, null],
    ],
    'the unfinished jobs, oldest first, each with its reservation; a trace context kept for queued jobs only',
  );
  t.same([...ra.keys.keys()], [a.keyId], 'the keys of its unfinished jobs');
  t.equal(ra.keys.get(a.keyId)?.month.credits, 4);
  t.equal(ra.walletSpentCents, 300 - 100, "this month's wallet reservations less its releases");
});
