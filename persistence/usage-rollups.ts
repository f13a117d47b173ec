/**
 * Usage rollups (migration 0012): per workspace, API key and UTC day of creation, the figures of
 * GET /v1/usage, so reading them costs what one day of rows costs, whatever the history.
 *
 * Writes (`addUsage`): every change of a figure adds its delta in the transaction of the write that
 * changes it (creations, settlements, output assets), as one upsert per (workspace, day, key) for a whole
 * group commit. Rows are upserted sorted by key, after the money of the same transaction, so
 * transactions committing side by side lock them in one order.
 *
 * Reads (`readUsage`): whole UTC days inside [from, to) from the rollup, the partial days at the edges
 * counted from their generations (index generations (workspace_id, created_at)), in one statement.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { emOf } from './stores/orm.ts';
import type { Unit } from './stores/unit.ts';
import { boundQuery } from './bound-query.ts';

export interface UsageFigures {
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  expired: number;
  unfinished: number;
  credits: number;
  creditsFromBalance: number;
  costCents: number;
  outputBytes: number;
}

export interface UsageDelta extends Partial<UsageFigures> {
  workspaceId: string;
  apiKeyId: string | null;
  /** The UTC date (YYYY-MM-DD) of the generation's creation. */
  day: string;
}

const FIGURES = ['total', 'succeeded', 'failed', 'cancelled', 'expired', 'unfinished', 'credits', 'creditsFromBalance', 'costCents', 'outputBytes'] as const;
const COLUMN: Record<keyof UsageFigures, string> = {
  total: 'total',
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
  expired: 'expired',
  unfinished: 'unfinished',
  credits: 'credits',
  creditsFromBalance: 'credits_from_balance',
  costCents: 'cost_cents',
  outputBytes: 'output_bytes',
};
const COLUMNS = FIGURES.map((f) => COLUMN[f]);
export const UNFINISHED_STATUSES = ['queued', 'reserved', 'submitted', 'running'];
const STATUS_FIGURE: Record<string, keyof UsageFigures> = {
  queued: 'unfinished',
  reserved: 'unfinished',
  submitted: 'unfinished',
  running: 'unfinished',
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
  expired: 'expired',
};

/** The figure a generation of this status counts in. */
export function statusFigure(status: string): keyof UsageFigures {
  const figure = STATUS_FIGURE[status];
  if (!figure) throw new Error(`unknown generation status ${status}`);
  return figure;
}

export function emptyFigures(): UsageFigures {
  return { total: 0, succeeded: 0, failed: 0, cancelled: 0, expired: 0, unfinished: 0, credits: 0, creditsFromBalance: 0, costCents: 0, outputBytes: 0 };
}

/** The rollup day of a generation created at `at`. */
export function usageDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/**
 * The upsert that adds the deltas to their rows (deltas of one row merged first, rows in key order), as a
 * statement to run or to ride in another (a data-modifying CTE); undefined when nothing moves.
 */
export function usageUpsert(deltas: UsageDelta[]): { sql: string; params: unknown[] } | undefined {
  const rows = new Map<string, Record<string, string | number>>();
  for (const delta of deltas) {
    const day = delta.day;
    const key = delta.apiKeyId ?? '';
    const id = `${delta.workspaceId}\u0000${day}\u0000${key}`;
    let row = rows.get(id);
    if (!row) {
      row = { workspace_id: delta.workspaceId, day, api_key_id: key, ...Object.fromEntries(COLUMNS.map((c) => [c, 0])) };
      rows.set(id, row);
    }
    for (const figure of FIGURES) (row[COLUMN[figure]] as number) += delta[figure] ?? 0;
  }
  const changed = [...rows.values()].filter((row) => COLUMNS.some((c) => row[c] !== 0));
  if (changed.length === 0) return undefined;
  return {
    sql: `insert into usage_rollups (workspace_id, day, api_key_id, ${COLUMNS.join(', ')})
     select d.workspace_id, d.day, d.api_key_id, ${COLUMNS.map((c) => `d.${c}`).join(', ')}
       from jsonb_to_recordset(?::jsonb) as d(workspace_id text, day date, api_key_id text, ${COLUMNS.map((c) => `${c} bigint`).join(', ')})
      order by d.workspace_id, d.day, d.api_key_id
     on conflict (workspace_id, day, api_key_id) do update set ${COLUMNS.map((c) => `${c} = usage_rollups.${c} + excluded.${c}`).join(', ')}`,
    params: [JSON.stringify(changed)],
  };
}

/** Adds the deltas to their rows in one statement. Call inside the transaction of the write the deltas describe. */
export async function addUsage(em: SqlEntityManager, deltas: UsageDelta[]): Promise<void> {
  const upsert = usageUpsert(deltas);
  if (upsert) await boundQuery(em, upsert.sql, upsert.params);
}

/**
 * The same delta for the asset rows a statement inserts or deletes: a CTE named `changed` with
 * `workspace_id`, `source_generation_id` and `bytes` (negative for deletes) adds them to their generations' rows.
 */
export const ADD_ASSET_BYTES = `
  insert into usage_rollups (workspace_id, day, api_key_id, output_bytes)
  select g.workspace_id, (g.created_at at time zone 'UTC')::date, coalesce(g.api_key_id, ''), sum(c.bytes)
    from changed c join generations g on g.id = c.source_generation_id and g.workspace_id = c.workspace_id
   group by 1, 2, 3 order by 1, 2, 3
  on conflict (workspace_id, day, api_key_id) do update set output_bytes = usage_rollups.output_bytes + excluded.output_bytes`;

const DAY_MS = 86_400_000;

/** A date-time whose digits past the millisecond are not all zero lies after what Date.parse makes of it. */
function pastMillisecond(value: string): boolean {
  return /\.\d{3}\d*[1-9]/.test(value);
}

/**
 * What splitting [from, to) gives: the whole UTC days [fromDay, toDay) (none when fromDay >= toDay) and
 * the partial edges [from, a) and [b, to), as times; `from` and `to` are ISO 8601 date-times.
 */
export function splitRange(from: string, to: string): { days?: { from: string; to: string }; edges: Array<[string, string]> } {
  const fromMs = Date.parse(from);
  const toMs = Date.parse(to);
  const fromDay = fromMs % DAY_MS === 0 && !pastMillisecond(from) ? fromMs : Math.floor(fromMs / DAY_MS) * DAY_MS + DAY_MS;
  const toDay = Math.floor(toMs / DAY_MS) * DAY_MS;
  if (fromDay > toDay) return { edges: [[from, to]] };
  // Written out by hand: toISOString gives '+010000-01-01…' past year 9999, which a date cast refuses.
  const date = (ms: number) => {
    const d = new Date(ms);
    const two = (n: number) => String(n).padStart(2, '0');
    return `${String(d.getUTCFullYear()).padStart(4, '0')}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}`;
  };
  const midnight = (ms: number) => `${date(ms)}T00:00:00Z`;
  const edges: Array<[string, string]> = [];
  if (fromDay > fromMs || pastMillisecond(from)) edges.push([from, midnight(fromDay)]);
  if (toMs > toDay || pastMillisecond(to)) edges.push([midnight(toDay), to]);
  return { days: fromDay < toDay ? { from: date(fromDay), to: date(toDay) } : undefined, edges };
}

/**
 * The usage of the generations of a workspace (of one of its keys when `apiKeyId` is set) created in
 * [from, to): the rollup rows of its whole days plus a count of the rows of its partial days.
 */
export async function readUsage(unit: Unit, workspaceId: string, apiKeyId: string | null, from: string, to: string): Promise<UsageFigures> {
  const em = emOf(unit);
  const { days, edges } = splitRange(from, to);
  const values: unknown[] = [];
  const keyRollup = apiKeyId === null ? '' : ' and r.api_key_id = ?';
  const keyRows = apiKeyId === null ? '' : ' and g.api_key_id = ?';
  const parts: string[] = [];
  if (days) {
    parts.push(`select ${COLUMNS.map((c) => `coalesce(sum(r.${c}), 0) as ${c}`).join(', ')}
      from usage_rollups r where r.workspace_id = ? and r.day >= ?::date and r.day < ?::date${keyRollup}`);
    values.push(workspaceId, days.from, days.to);
    if (apiKeyId !== null) values.push(apiKeyId);
  }
  if (edges.length > 0) {
    // The figures GET /v1/usage computed over the whole range, over the edges only, in one pass over the
    // edges' generations (index on workspace and creation time), each looking up its capture and its
    // outputs by their own indexes (aggregate laterals, which the planner keeps as lookups per row). This
    // keeps the cost linear whatever the statistics: PGlite has no autovacuum, and with none its planner
    // had joined a workspace's captures to its generations by scanning the day's rows once per capture.
    const inEdges = edges.map(() => '(g.created_at >= ?::timestamptz and g.created_at < ?::timestamptz)').join(' or ');
    parts.push(`select count(*) as total,
             count(*) filter (where g.status = 'succeeded') as succeeded, count(*) filter (where g.status = 'failed') as failed,
             count(*) filter (where g.status = 'cancelled') as cancelled, count(*) filter (where g.status = 'expired') as expired,
             count(*) filter (where g.status in ('queued', 'reserved', 'submitted', 'running')) as unfinished,
             coalesce(sum(g.credits) filter (where l.captures > 0), 0) as credits,
             coalesce(sum(-l.reserved_credits), 0) as credits_from_balance, coalesce(sum(-l.reserved_wallet_cents), 0) as cost_cents,
             coalesce(sum(b.bytes), 0) as output_bytes
        from generations g
        left join lateral (select count(*) as captures, sum(l.reserved_credits) as reserved_credits, sum(l.reserved_wallet_cents) as reserved_wallet_cents
                             from credit_ledger l
                            where l.workspace_id = g.workspace_id and l.kind = 'capture' and l.generation_id = g.id) l on true
        left join lateral (select sum(a.bytes) as bytes from assets a
                            where a.workspace_id = g.workspace_id and a.source_generation_id = g.id) b on true
       where g.workspace_id = ? and (${inEdges})${keyRows}`);
    values.push(workspaceId, ...edges.flat());
    if (apiKeyId !== null) values.push(apiKeyId);
  }
  const rows = await boundQuery<Record<string, string | number>>(em, parts.join(' union all '), values);
  const figures = emptyFigures();
  for (const row of rows) for (const figure of FIGURES) figures[figure] += Number(row[COLUMN[figure]] ?? 0);
  return figures;
}
