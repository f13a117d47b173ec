/**
 * Usage over time (migration 0022): per workspace, UTC hour and UTC day of creation, API key, model, mode and
 * project, the figures of GET /v1/usage and the tokens reported, so GET /v1/usage/series reads a few rows per
 * bucket and group, whatever the history.
 *
 * Writes (`seriesUpsert`): beside every usage_rollups delta, in the same transaction, one upsert of the
 * hour row and the day row of each generation's group, rows merged and sorted by key so transactions
 * committing side by side lock them in one order.
 *
 * Reads (`readSeries`): the rows of one grain in [from, to) by the primary key's prefix (workspace, grain,
 * bucket), summed by bucket and the asked dimensions.
 */
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { emOf } from './stores/orm.ts';
import type { Unit } from './stores/unit.ts';
import { boundQuery } from './bound-query.ts';
import { ADD_ASSET_BYTES, emptyFigures, type UsageFigures } from './usage-rollups.ts';

export type SeriesGrain = 'hour' | 'day';
export const SERIES_GRAINS: readonly SeriesGrain[] = ['hour', 'day'];

/** What a series can be split and filtered by. */
export type SeriesDimension = 'model' | 'key' | 'project' | 'mode';
export const SERIES_DIMENSIONS: readonly SeriesDimension[] = ['model', 'key', 'project', 'mode'];
const DIMENSION_COLUMN: Record<SeriesDimension, string> = { model: 'model_id', key: 'api_key_id', project: 'project', mode: 'mode' };

export interface SeriesFigures extends UsageFigures {
  tokensIn: number;
  tokensOut: number;
}

const FIGURE_COLUMN: Record<keyof SeriesFigures, string> = {
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
  tokensIn: 'tokens_in',
  tokensOut: 'tokens_out',
};
const FIGURES = Object.keys(FIGURE_COLUMN) as Array<keyof SeriesFigures>;
const COLUMNS = FIGURES.map((f) => FIGURE_COLUMN[f]);

export function emptySeriesFigures(): SeriesFigures {
  return { ...emptyFigures(), tokensIn: 0, tokensOut: 0 };
}

/** A change of one generation's figures, with what places it in the series. */
export interface SeriesDelta extends Partial<SeriesFigures> {
  workspaceId: string;
  apiKeyId: string | null;
  modelId: string;
  mode: string;
  project: string | null;
  /** The generation's creation time. */
  createdAt: Date | string | number;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The start of the UTC bucket of `grain` holding `at`. */
export function bucketOf(grain: SeriesGrain, at: number): number {
  const size = grain === 'hour' ? HOUR_MS : DAY_MS;
  return Math.floor(at / size) * size;
}

export function grainMs(grain: SeriesGrain): number {
  return grain === 'hour' ? HOUR_MS : DAY_MS;
}

/** The upsert adding the deltas to their hour and day rows, as a statement to run or to ride in another; undefined when nothing moves. */
export function seriesUpsert(deltas: SeriesDelta[]): { sql: string; params: unknown[] } | undefined {
  const rows = new Map<string, Record<string, string | number>>();
  for (const delta of deltas) {
    const at = new Date(delta.createdAt).getTime();
    for (const grain of SERIES_GRAINS) {
      const bucket = new Date(bucketOf(grain, at)).toISOString();
      const key = delta.apiKeyId ?? '';
      const project = delta.project ?? '';
      const id = [delta.workspaceId, grain, bucket, key, delta.modelId, delta.mode, project].join('\u0000');
      let row = rows.get(id);
      if (!row) {
        row = {
          workspace_id: delta.workspaceId,
          grain,
          bucket,
          api_key_id: key,
          model_id: delta.modelId,
          mode: delta.mode,
          project,
          ...Object.fromEntries(COLUMNS.map((c) => [c, 0])),
        };
        rows.set(id, row);
      }
      for (const figure of FIGURES) (row[FIGURE_COLUMN[figure]] as number) += delta[figure] ?? 0;
    }
  }
  const changed = [...rows.values()].filter((row) => COLUMNS.some((c) => row[c] !== 0));
  if (changed.length === 0) return undefined;
  return {
    sql: `insert into usage_series (workspace_id, grain, bucket, api_key_id, model_id, mode, project, ${COLUMNS.join(', ')})
     select d.workspace_id, d.grain, d.bucket, d.api_key_id, d.model_id, d.mode, d.project, ${COLUMNS.map((c) => `d.${c}`).join(', ')}
       from jsonb_to_recordset(?::jsonb) as d(workspace_id text, grain text, bucket timestamptz, api_key_id text, model_id text, mode text,
         project text, ${COLUMNS.map((c) => `${c} bigint`).join(', ')})
      order by d.workspace_id, d.grain, d.bucket, d.api_key_id, d.model_id, d.mode, d.project
     on conflict (workspace_id, grain, bucket, api_key_id, model_id, mode, project) do update set ${COLUMNS.map((c) => `${c} = usage_series.${c} + excluded.${c}`).join(', ')}`,
    params: [JSON.stringify(changed)],
  };
}

/** Adds the deltas to their rows in one statement, inside the transaction of the write they describe. */
export async function addSeries(em: SqlEntityManager, deltas: SeriesDelta[]): Promise<void> {
  const upsert = seriesUpsert(deltas);
  if (upsert) await boundQuery(em, upsert.sql, upsert.params);
}

/**
 * The same for the output bytes of asset rows a statement inserts or deletes, to follow `ADD_ASSET_BYTES`
 * in its statement (usage-rollups.ts): it reads the same CTE named `changed`.
 */
export const ADD_ASSET_SERIES_BYTES = `
  insert into usage_series (workspace_id, grain, bucket, api_key_id, model_id, mode, project, output_bytes)
  select g.workspace_id, s.grain, date_trunc(s.grain, g.created_at at time zone 'UTC') at time zone 'UTC', coalesce(g.api_key_id, ''),
         g.model_id, g.mode, coalesce(g.project, ''), sum(c.bytes)
    from changed c join generations g on g.id = c.source_generation_id and g.workspace_id = c.workspace_id
    cross join (values ('hour'), ('day')) as s(grain)
   group by 1, 2, 3, 4, 5, 6, 7 order by 1, 2, 3, 4, 5, 6, 7
  on conflict (workspace_id, grain, bucket, api_key_id, model_id, mode, project) do update set output_bytes = usage_series.output_bytes + excluded.output_bytes`;

export interface SeriesQuery {
  workspaceId: string;
  grain: SeriesGrain;
  /** Bucket starts, ISO 8601: [from, to). */
  from: string;
  to: string;
  filters: Partial<Record<SeriesDimension, string>>;
  groupBy: SeriesDimension[];
  /** At most this many rows. */
  limit: number;
}

export interface SeriesRow {
  bucket: Date;
  group: Partial<Record<SeriesDimension, string>>;
  figures: SeriesFigures;
}

/** The buckets of [from, to) with any generation, each split by `groupBy`, in bucket order then group order. */
export async function readSeries(unit: Unit, q: SeriesQuery): Promise<SeriesRow[]> {
  const em = emOf(unit);
  const values: unknown[] = [q.workspaceId, q.grain, q.from, q.to];
  let where = 's.workspace_id = ? and s.grain = ? and s.bucket >= ?::timestamptz and s.bucket < ?::timestamptz';
  for (const dimension of SERIES_DIMENSIONS) {
    const value = q.filters[dimension];
    if (value === undefined) continue;
    where += ` and s.${DIMENSION_COLUMN[dimension]} = ?`;
    values.push(value);
  }
  const groups = q.groupBy.map((d) => `s.${DIMENSION_COLUMN[d]}`);
  const select = ['s.bucket', ...groups.map((c, i) => `${c} as g${i}`), ...COLUMNS.map((c) => `sum(s.${c}) as ${c}`)].join(', ');
  const groupBy = ['s.bucket', ...groups].join(', ');
  const rows = await boundQuery<Record<string, unknown>>(
    em,
    `select ${select} from usage_series s where ${where} group by ${groupBy} order by ${groupBy} limit ?`,
    [...values, q.limit],
  );
  return rows.map((row) => {
    const figures = emptySeriesFigures();
    for (const figure of FIGURES) figures[figure] = Number(row[FIGURE_COLUMN[figure]] ?? 0);
    const group: Partial<Record<SeriesDimension, string>> = {};
    q.groupBy.forEach((d, i) => {
      group[d] = String(row[`g${i}`]);
    });
    return { bucket: new Date(row.bucket as string), group, figures };
  });
}

/**
 * After `with changed as (…)`: the asset rows' bytes added to both the usage rollups and the series, in one
 * statement (a data-modifying CTE runs whether or not it is read).
 */
export const ADD_ASSET_USAGE = `, rollup_rows as (${ADD_ASSET_BYTES} returning 1) ${ADD_ASSET_SERIES_BYTES}`;
