import { JsonProperty, Utils, type Platform } from '@mikro-orm/core';

/** A statement ready for the driver: SQL text with `?` placeholders and one value per placeholder. */
export interface BoundStatement {
  sql: string;
  bindings: unknown[];
}

interface KnexRawLike {
  toSQL(): { sql: string; bindings?: readonly unknown[] };
}

function isKnexRaw(value: unknown): value is KnexRawLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    'client' in value &&
    ['Ref', 'Raw'].includes(value.constructor.name) &&
    typeof (value as unknown as KnexRawLike).toSQL === 'function'
  );
}

/**
 * Rewrites a MikroORM statement (`?` values, `??` identifiers, `\?` a literal question mark) so that every
 * value travels as a driver parameter instead of being spliced into the SQL text, as MikroORM's own
 * `formatQuery` does. The text sent to the server then holds only what the code wrote: a value cannot
 * change how the statement is parsed, on PostgreSQL or on PGlite (whose adapter runs any text with a `;`
 * in it as several statements).
 *
 * Values are given in the form MikroORM would have written them, with the type their literal had: dates in
 * the platform's format, numbers and booleans cast to their literal's type, plain
 * objects and JSON-marked arrays as JSON text, other arrays as a list of parameters (`in (?)`), raw
 * fragments inlined as SQL with their own parameters bound in turn.
 */
export function bindStatement(platform: Platform, sql: string, params: readonly unknown[]): BoundStatement {
  const bindings: unknown[] = [];
  return { sql: rewrite(platform, sql, params, bindings), bindings };
}

function rewrite(platform: Platform, sql: string, params: readonly unknown[], bindings: unknown[]): string {
  let out = '';
  let next = 0;
  let pos = 0;
  while (pos < sql.length) {
    const at = sql.indexOf('?', pos);
    if (at === -1) {
      out += sql.slice(pos);
      break;
    }
    if (at > 0 && sql[at - 1] === '\\') {
      out += sql.slice(pos, at + 1);
      pos = at + 1;
    } else if (sql[at + 1] === '?') {
      out += sql.slice(pos, at) + platform.quoteIdentifier(String(params[next++]));
      pos = at + 2;
    } else {
      out += sql.slice(pos, at) + placeholder(platform, params[next++], bindings);
      pos = at + 1;
    }
  }
  return out;
}

function placeholder(platform: Platform, value: unknown, bindings: unknown[]): string {
  if (Utils.isRawSql(value)) return rewrite(platform, value.sql, value.params ?? [], bindings);
  if (isKnexRaw(value)) {
    const inner = value.toSQL();
    return rewrite(platform, inner.sql, inner.bindings ?? [], bindings);
  }
  if (Array.isArray(value) && !(value as { [JsonProperty]?: unknown })[JsonProperty]) {
    return value.map((item) => placeholder(platform, item, bindings)).join(', ');
  }
  bindings.push(driverValue(platform, value));
  return `?${literalType(value)}`;
}

/**
 * A number or boolean spliced into SQL text is a typed constant (`71` is an integer, `1.5` a numeric,
 * `true` a boolean); a parameter without a type would be left for the server to guess, and next to
 * another untyped value it guesses text (`'71' <= '536870912000'` is false). The cast gives each bound
 * value the type its literal had, so statements mean what they meant when values were inlined.
 */
function literalType(value: unknown): string {
  if (typeof value === 'boolean') return '::boolean';
  if (typeof value !== 'number') return '';
  if (!Number.isInteger(value)) return Number.isFinite(value) ? '::numeric' : '::float8';
  if (value >= -2147483648 && value <= 2147483647) return '::int4';
  return Number.isSafeInteger(value) ? '::int8' : '::numeric';
}

function driverValue(platform: Platform, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  if (value instanceof Date) return (platform as unknown as { formatDate(date: Date): string }).formatDate(value);
  if (ArrayBuffer.isView(value)) return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'object') return JSON.stringify(value);
  return value;
}
