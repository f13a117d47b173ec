/**
 * What a workspace actor is made from, read from the database in five statements whatever the number of
 * workspaces: their plans and accounts, their unfinished jobs with their reservations, the limits and spend
 * of those jobs' keys, and their wallet spending of the month.
 */
import { monthOf } from '../../../domain/account.ts';
import type { KeySpend } from '../../../domain/key-limits.ts';
import { boundQuery } from '../../bound-query.ts';
import { emOf } from '../orm.ts';
import type { Unit } from '../unit.ts';
import { readKeySpends } from './keys.ts';

/** One unfinished job as the workspace reads it: its slot, provider, deadline, and what it reserved. */
export interface OpenJob {
  id: string;
  workspace_id: string;
  status: string;
  provider: string;
  deployment_id: string | null;
  queue_deadline: Date | string;
  reserved_credits: number | string | null;
  reserved_wallet_cents: number | string | null;
  api_key_id: string | null;
  created_at: Date | string;
  credits: number | string;
  trace_context: unknown;
}

/** An OpenJob as the statement sends it: its columns in order. */
type OpenJobTuple = [string, string, string, string, number | null, number | null, string | null, string, number, unknown, string | null];

export interface AccountRow {
  id: string;
  plan: string | null;
  has_account: boolean;
  available_credits: number | string | null;
  reserved_credits: number | string | null;
  wallet_cents: number | string | null;
  reserved_wallet_cents: number | string | null;
  wallet_activated: boolean | null;
  token_carry_nano: number | string | null;
  auto_recharge_enabled: boolean | null;
  auto_recharge_threshold_cents: number | string | null;
  auto_recharge_amount_cents: number | string | null;
  monthly_spend_cap_cents: number | string | null;
  workspace_exists: boolean;
}

/**
 * What a workspace actor is made from, read from the database: the workspace's plan, its account and
 * wallet settings, its unfinished jobs with their reservations, the limits and current spend of those
 * jobs' keys, and its wallet spending of the month, all as of `now`.
 */
export interface WorkspaceRecord {
  workspaceId: string;
  now: number;
  /** The workspace row exists (a workspace without one loads with the free plan and an empty account). */
  exists: boolean;
  plan: string | null;
  account: AccountRow | undefined;
  open: OpenJob[];
  keys: Map<string, KeySpend>;
  walletSpentCents: number;
}

/**
 * The records of many workspaces in five statements, whatever their number (a restart loads the
 * workspaces of every job in flight at once, not each with statements of its own); one workspace's
 * record costs the same five.
 */
export async function readWorkspaces(unit: Unit, workspaceIds: string[], now: number): Promise<Map<string, WorkspaceRecord>> {
  const records = new Map<string, WorkspaceRecord>();
  if (workspaceIds.length === 0) return records;
  const em = emOf(unit);
  const ids = JSON.stringify(workspaceIds);
  const accounts = await boundQuery<AccountRow>(
    em,
    `select ids.id, w.plan, w.id is not null as workspace_exists, a.workspace_id is not null as has_account,
            a.available_credits, a.reserved_credits, a.wallet_cents, a.reserved_wallet_cents, a.wallet_activated, a.token_carry_nano,
            a.auto_recharge_enabled, a.auto_recharge_threshold_cents, a.auto_recharge_amount_cents, a.monthly_spend_cap_cents
       from jsonb_array_elements_text(?::jsonb) as ids(id)
       left join workspaces w on w.id = ids.id
       left join workspace_accounts a on a.workspace_id = ids.id`,
    [ids],
  );
  for (const row of accounts) {
    records.set(row.id, {
      workspaceId: row.id,
      now,
      exists: row.workspace_exists,
      plan: row.plan,
      account: row.has_account ? row : undefined,
      open: [],
      keys: new Map(),
      walletSpentCents: 0,
    });
  }
  // Each unfinished job holds what its ledger `reserve` entry took; its terminal status commits with the capture or release.
  // One JSON array per workspace rather than a row per job: a restart reads tens of thousands of them, and
  // parsing one JSON text costs far less than decoding as many rows (PGlite decodes rows in JavaScript).
  const open = await boundQuery<{ workspace_id: string; jobs: string }>(
    em,
    `select g.workspace_id, json_agg(json_build_array(g.id, g.status, g.provider, g.queue_deadline, l.reserved_credits, l.reserved_wallet_cents,
              g.api_key_id, g.created_at, g.credits, case when g.status = 'queued' then g.trace_context end, g.deployment_id) order by g.created_at, g.id)::text as jobs
       from generations g
       left join credit_ledger l on l.workspace_id = g.workspace_id and l.kind = 'reserve' and l.generation_id = g.id
      where g.workspace_id in (select jsonb_array_elements_text(?::jsonb)) and g.status in ('queued', 'reserved', 'submitted', 'running')
      group by g.workspace_id`,
    [ids],
  );
  for (const { workspace_id: workspaceId, jobs } of open) {
    const record = records.get(workspaceId);
    if (!record) continue;
    for (const [
      id,
      status,
      provider,
      queueDeadline,
      reservedCredits,
      reservedWalletCents,
      apiKeyId,
      createdAt,
      credits,
      traceContext,
      deploymentId,
    ] of JSON.parse(jobs) as OpenJobTuple[]) {
      record.open.push({
        id,
        workspace_id: workspaceId,
        status,
        provider,
        deployment_id: deploymentId ?? null,
        queue_deadline: queueDeadline,
        reserved_credits: reservedCredits,
        reserved_wallet_cents: reservedWalletCents,
        api_key_id: apiKeyId,
        created_at: createdAt,
        credits,
        trace_context: traceContext,
      });
    }
  }

  // The limits and current day's and month's spend of the keys of those jobs (a key of another workspace is not found).
  const keyOwner = new Map<string, string>();
  for (const record of records.values()) for (const job of record.open) if (job.api_key_id !== null) keyOwner.set(job.api_key_id, job.workspace_id);
  for (const [keyId, spend] of await readKeySpends(unit, keyOwner, now)) records.get(keyOwner.get(keyId)!)?.keys.set(keyId, spend);

  // Wallet money spent this UTC month: reservations less releases, through the index of the entries that moved wallet money.
  const spent = await boundQuery<{ workspace_id: string; spent: number | string }>(
    em,
    `select workspace_id, coalesce(sum(-wallet_cents), 0) as spent from credit_ledger
      where workspace_id in (select jsonb_array_elements_text(?::jsonb)) and kind in ('reserve', 'release') and wallet_cents <> 0 and created_at >= ?
      group by workspace_id`,
    [ids, new Date(`${monthOf(now)}-01T00:00:00Z`)],
  );
  for (const row of spent) {
    const record = records.get(row.workspace_id);
    if (record) record.walletSpentCents = Number(row.spent);
  }
  return records;
}
