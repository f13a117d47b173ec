import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { WorkspaceIdField } from '../billing/shapes.ts';
import { timeBound } from '../generations/list.ts';
import {
  bucketOf,
  emptySeriesFigures,
  grainMs,
  readSeries,
  SERIES_DIMENSIONS,
  type SeriesDimension,
  type SeriesFigures,
  type SeriesGrain,
  type SeriesRow,
} from '../../../persistence/usage-series.ts';
import { seriesCsv } from './series-csv.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

const Count = Type.Integer({ minimum: 0 });
const When = (description: string) => Type.String({ minLength: 10, maxLength: 40, description });
const Name = (description: string) => Type.String({ minLength: 1, maxLength: 200, description });

/** At most this many buckets per request: 93 days by hour, about ten years by day. */
export const MAX_BUCKETS = { hour: 24 * 93, day: 3660 } as const;
/** At most this many points (bucket x group) per answer; more asks for a narrower range or fewer groups. */
export const MAX_POINTS = 50_000;

const Group = Type.Object(
  {
    model: Type.Optional(Type.String({ description: 'The model id.' })),
    key: Type.Optional(Type.String({ description: "The API key's id; '' for generations made without a key (signed in)." })),
    project: Type.Optional(Type.String({ description: "The generation's project; '' for none." })),
    mode: Type.Optional(Type.String({ description: 'The generation mode.' })),
  },
  { additionalProperties: false, description: 'The values of the groupBy dimensions this point or total is for; empty when not grouped.' },
);

const Figures = {
  generations: Type.Object(
    { total: Count, succeeded: Count, failed: Count, cancelled: Count, expired: Count, unfinished: Count },
    { additionalProperties: false, description: 'Generations created in the bucket, by outcome (unfinished: not ended yet).' },
  ),
  credits: Type.Integer({ minimum: 0, description: 'Credits charged (captured) for them, whatever paid.' }),
  creditsFromBalance: Type.Integer({ minimum: 0, description: 'Of those, credits taken from the credit balance.' }),
  costCents: Type.Integer({ minimum: 0, description: 'Wallet spend: cents taken from the wallet.' }),
  tokensIn: Type.Integer({ minimum: 0, description: 'Input tokens their providers reported (text models).' }),
  tokensOut: Type.Integer({ minimum: 0, description: 'Output tokens their providers reported (text models).' }),
  outputBytes: Type.Integer({ minimum: 0, description: 'Bytes of their output assets still stored.' }),
};

const Point = Type.Object(
  { bucket: Type.String({ format: 'date-time', description: 'The start of the UTC hour or day.' }), group: Group, ...Figures },
  { additionalProperties: false },
);
const Total = Type.Object({ group: Group, ...Figures }, { additionalProperties: false });

export const UsageSeriesOut = Type.Object(
  {
    workspaceId: Type.String(),
    apiKeyId: Type.Union([Type.String(), Type.Null()], { description: 'Set when the series is that of one API key (always, when called with a key).' }),
    granularity: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
    from: Type.String({ format: 'date-time', description: 'The first bucket: `from` as asked, rounded down to its UTC hour or day.' }),
    to: Type.String({ format: 'date-time', description: 'The end of the last bucket: `to` as asked, rounded up to a UTC hour or day.' }),
    groupBy: Type.Array(Type.Union(SERIES_DIMENSIONS.map((d) => Type.Literal(d)))),
    points: Type.Array(Point, { description: 'One per bucket and group with any generation, by bucket then group; buckets without any are left out.' }),
    totals: Type.Array(Total, { description: 'One per group over the whole range, most credits first: the breakdown table.' }),
  },
  {
    additionalProperties: false,
    description:
      'Usage over time of the generations created in [from, to): the figures of GET /v1/usage and the tokens reported, by UTC hour or day, split by the asked dimensions.',
  },
);

export const getUsageSeries = defineRoute({
  method: 'GET',
  path: '/v1/usage/series',
  operationId: 'getUsageSeries',
  summary: 'Usage over time by hour or day: credits, wallet spend, jobs by outcome, tokens and output bytes; grouped and filtered by model, key, project, mode',
  description:
    "The usage of a workspace over time, read from its hourly and daily rollups (the cost does not grow with the history). Filter by model, API key, project and mode; group by any of them. Called with an API key, it covers that key's own usage only. Ask `format=csv` or `Accept: text/csv` for the same points as CSV, streamed.",
  tags: ['usage'],
  access: { scopes: ['usage.read'] },
  errors: ['not_found'],
  csv: 'One header line, then one line per point: bucket, the groupBy columns (model, key, project, mode, in that order), total, succeeded, failed, cancelled, expired, unfinished, credits, creditsFromBalance, costCents, tokensIn, tokensOut, outputBytes (RFC 4180).',
  query: Type.Object(
    {
      workspaceId: WorkspaceIdField,
      granularity: Type.Optional(Type.Union([Type.Literal('hour'), Type.Literal('day')], { description: 'Bucket size (UTC). Default: day.' })),
      from: Type.Optional(
        When('Generations created at or after (ISO 8601 date-time with a zone, or a UTC date). Default: 30 days (by day) or 24 hours (by hour) before `to`.'),
      ),
      to: Type.Optional(When('Created before (a date-only value includes that whole day). Default: now.')),
      groupBy: Type.Optional(
        Type.String({
          maxLength: 40,
          pattern: '^(model|key|project|mode)(,(model|key|project|mode))*$',
          description: 'Comma-separated: model, key, project, mode.',
        }),
      ),
      model: Type.Optional(Name('Only this model.')),
      apiKeyId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Only this API key (signed in); a key always reads its own.' })),
      project: Type.Optional(Name('Only this project.')),
      mode: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'Only this mode.' })),
      format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')], { description: 'csv: the points as CSV (as `Accept: text/csv`).' })),
    },
    { additionalProperties: false },
  ),
  responses: { 200: UsageSeriesOut },
  handler: async ({ auth, query, headers, services }) => {
    const em = openUnit(services.db);
    const workspace = await moneyWorkspace(em, auth, query.workspaceId);
    let apiKeyId: string | null = query.apiKeyId ?? null;
    if (auth?.kind === 'key') {
      if (apiKeyId !== null && apiKeyId !== auth.keyId) throw new ApiError('forbidden', 'An API key reads its own usage only.');
      apiKeyId = auth.keyId;
    }
    const grain: SeriesGrain = query.granularity ?? 'day';
    const size = grainMs(grain);
    const now = services.clock.now();
    const toAsked = query.to === undefined ? now + 1 : Date.parse(timeBound('to', query.to));
    const to = Math.ceil(toAsked / size) * size;
    const fromAsked = query.from === undefined ? to - (grain === 'day' ? 30 : 24) * size : Date.parse(timeBound('from', query.from));
    const from = bucketOf(grain, fromAsked);
    if (from >= to) throw new ApiError('validation_error', 'query.from: must be before query.to');
    if ((to - from) / size > MAX_BUCKETS[grain]) {
      throw new ApiError('validation_error', `query.from: at most ${MAX_BUCKETS[grain]} buckets by ${grain}; narrow the range or use a larger granularity`);
    }
    const groupBy = query.groupBy === undefined ? [] : [...new Set(query.groupBy.split(',') as SeriesDimension[])];
    const filters: Partial<Record<SeriesDimension, string>> = {};
    if (query.model !== undefined) filters.model = query.model;
    if (apiKeyId !== null) filters.key = apiKeyId;
    if (query.project !== undefined) filters.project = query.project;
    if (query.mode !== undefined) filters.mode = query.mode;

    const rows = await readSeries(em, {
      workspaceId: workspace.id,
      grain,
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      filters,
      groupBy,
      limit: MAX_POINTS + 1,
    });
    if (rows.length > MAX_POINTS) {
      throw new ApiError('validation_error', `query: more than ${MAX_POINTS} points; narrow the range, filter, or group by fewer dimensions`);
    }
    const wantsCsv = query.format === 'csv' || (query.format === undefined && /\btext\/csv\b/i.test(headers.accept ?? ''));
    if (wantsCsv) {
      const name = `usage-${workspace.id}-${grain}-${new Date(from).toISOString().slice(0, 10)}.csv`;
      return {
        headers: { 'Content-Type': 'text/csv; charset=utf-8', 'Content-Disposition': `attachment; filename="${name}"`, 'Cache-Control': 'no-store' },
        chunked: seriesCsv(rows, groupBy),
      };
    }
    return {
      body: {
        workspaceId: workspace.id,
        apiKeyId,
        granularity: grain,
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
        groupBy,
        points: rows.map((row) => ({ bucket: row.bucket.toISOString(), group: row.group, ...figuresOut(row.figures) })),
        totals: totalsOf(rows),
      },
    };
  },
});

function figuresOut(f: SeriesFigures) {
  return {
    generations: { total: f.total, succeeded: f.succeeded, failed: f.failed, cancelled: f.cancelled, expired: f.expired, unfinished: f.unfinished },
    credits: f.credits,
    creditsFromBalance: f.creditsFromBalance,
    costCents: f.costCents,
    tokensIn: f.tokensIn,
    tokensOut: f.tokensOut,
    outputBytes: f.outputBytes,
  };
}

/** The points summed per group, most credits first (then most generations, then the group's values). */
function totalsOf(rows: SeriesRow[]) {
  const totals = new Map<string, { group: SeriesRow['group']; figures: SeriesFigures }>();
  for (const row of rows) {
    const id = JSON.stringify(row.group);
    let total = totals.get(id);
    if (!total) {
      total = { group: row.group, figures: emptySeriesFigures() };
      totals.set(id, total);
    }
    for (const name of Object.keys(row.figures) as Array<keyof SeriesFigures>) total.figures[name] += row.figures[name];
  }
  return [...totals.entries()]
    .sort(([a, x], [b, y]) => y.figures.credits - x.figures.credits || y.figures.total - x.figures.total || (a < b ? -1 : a > b ? 1 : 0))
    .map(([, t]) => ({ group: t.group, ...figuresOut(t.figures) }));
}
