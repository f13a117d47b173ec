import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { decodeCursor, encodeCursor, Page, PageQueryFields } from '../../pagination.ts';
import { listGenerations as listGenerationRows } from '../../../persistence/stores/generations/reads.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { readWorkspace } from './access.ts';
import { GenerationMode, GenerationOut, GenerationStatusName, toGenerationOut } from './shape.ts';

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/i;
/** created_at as Postgres prints it to the microsecond, so a cursor never falls between two rows of one millisecond. */
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const DAY_MS = 86_400_000;

const When = (description: string) => Type.String({ minLength: 10, maxLength: 40, description });

export const ListGenerationsQuery = Type.Object(
  {
    workspaceId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'Required with a session; with an API key, its own workspace (any other is 403).' }),
    ),
    mode: Type.Optional(GenerationMode),
    status: Type.Optional(GenerationStatusName),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Model id, e.g. local/image-fast.' })),
    project: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The project label given at creation.' })),
    apiKeyId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The API key that created it (key_…).' })),
    from: Type.Optional(When('Created at or after: ISO 8601 date-time with a zone (2026-01-31T12:00:00Z) or a UTC date (2026-01-31, from its start).')),
    to: Type.Optional(When('Created before: ISO 8601 date-time with a zone, or a UTC date (2026-01-31: up to the end of that day).')),
    ...PageQueryFields,
  },
  { additionalProperties: false },
);

/** `from` and `to` as timestamps Postgres parses itself (no precision lost); a date-only `to` includes its whole day. */
export function timeBound(name: 'from' | 'to', value: string): string {
  if (DATE.test(value)) {
    const start = dayStart(value);
    if (start === undefined) throw new ApiError('validation_error', `query.${name}: ${value} is not a calendar date`);
    return new Date(name === 'to' ? start + DAY_MS : start).toISOString();
  }
  if (!DATE_TIME.test(value) || Number.isNaN(Date.parse(value))) {
    throw new ApiError('validation_error', `query.${name}: must be an ISO 8601 date-time with a time zone (2026-01-31T12:00:00Z) or a date (2026-01-31)`);
  }
  if (dayStart(value.slice(0, 10)) === undefined) throw new ApiError('validation_error', `query.${name}: ${value.slice(0, 10)} is not a calendar date`);
  return value;
}

/** Midnight UTC of a YYYY-MM-DD that exists (Date.parse would roll 2026-02-30 over to March). */
function dayStart(day: string): number | undefined {
  const start = Date.parse(`${day}T00:00:00Z`);
  return Number.isNaN(start) || new Date(start).toISOString().slice(0, 10) !== day ? undefined : start;
}

export const listGenerations = defineRoute({
  method: 'GET',
  path: '/v1/generations',
  operationId: 'listGenerations',
  summary: 'List the generations of a workspace, newest first, with filters (mode, status, model, project, API key, from/to) and cursor pagination',
  description:
    'Lists the generations of a workspace, newest first, filtered by mode, status, model, project, API key and a from/to range, with cursor pagination. A session must name the workspace; an API key reads its own.',
  tags: ['generations'],
  access: { scopes: ['generations.read'] },
  errors: ['not_found'],
  // A key lists its own workspace; naming it is allowed, naming another is 403 (checked in readWorkspace).
  query: ListGenerationsQuery,
  responses: { 200: Page(GenerationOut) },
  handler: async ({ auth, query, services }) => {
    const unit = openUnit(services.db);
    const workspace = await readWorkspace(unit, auth, query.workspaceId);
    const limit = query.limit ?? 20;
    const from = query.from === undefined ? undefined : timeBound('from', query.from);
    const to = query.to === undefined ? undefined : timeBound('to', query.to);
    if (from !== undefined && to !== undefined && Date.parse(from) >= Date.parse(to)) {
      throw new ApiError('validation_error', 'query.from: must be before query.to');
    }
    let after: [string, string] | undefined;
    if (query.cursor) {
      const [at, id] = decodeCursor(query.cursor, ['string', 'string']) as [string, string];
      if (!CURSOR_TIME.test(at)) throw new ApiError('validation_error', 'query.cursor: is not a cursor this list gave out');
      after = [at, id];
    }
    const { mode, status, model, project, apiKeyId } = query;
    const rows = await listGenerationRows(unit, workspace.id, { mode, status, model, project, apiKeyId, from, to }, { after, limit: limit + 1 });
    const more = rows.length > limit;
    const kept = more ? rows.slice(0, limit) : rows;
    const last = kept[kept.length - 1];
    return {
      body: {
        data: kept.map(({ row }) => toGenerationOut(row)),
        nextCursor: more && last ? encodeCursor([last.cursorAt, last.row.id]) : null,
      },
    };
  },
});
