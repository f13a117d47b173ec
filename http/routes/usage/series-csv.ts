import type { SeriesDimension, SeriesRow } from '../../../persistence/usage-series.ts';
import { SERIES_DIMENSIONS } from '../../../persistence/usage-series.ts';

const FIGURES = [
  'total',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
  'unfinished',
  'credits',
  'creditsFromBalance',
  'costCents',
  'tokensIn',
  'tokensOut',
  'outputBytes',
] as const;

/** Lines are sent in chunks of about this many characters. */
const CHUNK_CHARS = 16_384;

/**
 * One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. A text starting with
 * `=`, `+`, `-`, `@`, tab or carriage return gets a leading `'`, so a spreadsheet opening the export never
 * runs it as a formula (project names are the callers' own text).
 */
export function csvField(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** The series as CSV, a header line then one line per point (CRLF-terminated), yielded in chunks as it is made. */
export async function* seriesCsv(rows: SeriesRow[], groupBy: SeriesDimension[]): AsyncGenerator<string> {
  const dimensions = SERIES_DIMENSIONS.filter((d) => groupBy.includes(d));
  let chunk = `${['bucket', ...dimensions, ...FIGURES].join(',')}\r\n`;
  for (const row of rows) {
    const fields = [row.bucket.toISOString(), ...dimensions.map((d) => csvField(row.group[d] ?? '')), ...FIGURES.map((f) => String(row.figures[f]))];
    chunk += `${fields.join(',')}\r\n`;
    if (chunk.length >= CHUNK_CHARS) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk.length > 0) yield chunk;
}
