/** The reads of generations that the API answers: one by id, and a page of a workspace's history. */
import { GenerationEntity, type GenerationRow } from '../../entities/generation.ts';
import { emOf } from '../orm.ts';
import type { Unit } from '../unit.ts';

export type { GenerationRow } from '../../entities/generation.ts';

export function findGeneration(unit: Unit, id: string): Promise<GenerationRow | null> {
  return emOf(unit).findOne(GenerationEntity, { id });
}

/** A generation read afresh from the database, past any copy a unit of work holds (a live stream's catch-up). */
export function readGenerationAfresh(unit: Unit, id: string): Promise<GenerationRow | null> {
  return emOf(unit).findOne(GenerationEntity, { id }, { disableIdentityMap: true });
}

/** The workspace of a generation, reading nothing else of its row. */
export async function workspaceOfGeneration(unit: Unit, id: string): Promise<string | undefined> {
  const row = await emOf(unit).findOne(GenerationEntity, { id }, { fields: ['id', 'workspaceId'] });
  return row?.workspaceId;
}

/** What a page of a workspace's generations is filtered by; each an equality but the time range. */
export interface GenerationFilter {
  mode?: string;
  status?: string;
  model?: string;
  project?: string;
  apiKeyId?: string;
  /** Created at or after, a timestamp Postgres parses. */
  from?: string;
  /** Created before. */
  to?: string;
}

/** A generation of a page, with its created_at to the microsecond (the next page's cursor). */
export interface ListedGeneration {
  row: GenerationRow;
  cursorAt: string;
}

/**
 * A page of a workspace's generations, newest first, filtered, after the `(created_at, id)` of the page
 * before. Every filter is an equality on a column of an index (workspace_id, <filter>, created_at desc,
 * id desc) of migration 0005, so a page is one index range scan whatever the size of the history.
 */
export async function listGenerations(
  unit: Unit,
  workspaceId: string,
  filter: GenerationFilter,
  page: { after?: [at: string, id: string]; limit: number },
): Promise<ListedGeneration[]> {
  const em = emOf(unit);
  const where = ['workspace_id = ?'];
  const values: unknown[] = [workspaceId];
  const equal = (column: string, value: string | undefined) => {
    if (value === undefined) return;
    where.push(`${column} = ?`);
    values.push(value);
  };
  equal('mode', filter.mode);
  equal('status', filter.status);
  equal('model_id', filter.model);
  equal('project', filter.project);
  // Index generations_api_key_idx (api_key_id, created_at desc), with the workspace checked on each row.
  equal('api_key_id', filter.apiKeyId);
  if (filter.from !== undefined) {
    where.push('created_at >= ?::timestamptz');
    values.push(filter.from);
  }
  if (filter.to !== undefined) {
    where.push('created_at < ?::timestamptz');
    values.push(filter.to);
  }
  if (page.after) {
    where.push('(created_at, id) < (?::timestamptz, ?)');
    values.push(...page.after);
  }
  values.push(page.limit);
  const rows = await em.execute<Array<Record<string, unknown> & { cursor_at: string }>>(
    `select *, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at
         from generations where ${where.join(' and ')}
         order by created_at desc, id desc limit ?`,
    values,
  );
  return rows.map((row) => ({ row: em.map(GenerationEntity, row) as GenerationRow, cursorAt: row.cursor_at }));
}
