import { ApiError } from '../errors.ts';
import { unstorableProblem } from '../validation.ts';

/** Request headers whose values the service stores or looks up in the database. */
const STORED_HEADERS: Array<[name: string, label: string]> = [
  ['idempotency-key', 'Idempotency-Key'],
  ['user-agent', 'User-Agent'],
];

/** The route's path parameters, percent-decoded; a malformed escape is a validation_error naming the parameter. */
export function decodeParams(raw: Record<string, string>): Record<string, string> {
  const params: Record<string, string> = {};
  for (const name in raw) {
    try {
      params[name] = decodeURIComponent(raw[name]!);
    } catch {
      throw new ApiError('validation_error', `path parameter ${name} has invalid percent-encoding`);
    }
  }
  return params;
}

/** The query string as an object: a name given once is a string, one given more than once an array. */
export function parseQuery(raw: string): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  if (raw === '') return query;
  for (const [key, value] of new URLSearchParams(raw)) {
    const existing = query[key];
    if (existing === undefined) query[key] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else query[key] = [existing, value];
  }
  return query;
}

/**
 * Every string a request carries (path parameters, query, the JSON body to any depth, the headers that are
 * stored) must be text PostgreSQL can hold: U+0000 or an unpaired surrogate anywhere, or a body nested
 * past MAX_JSON_DEPTH, is a validation_error naming the field, before any schema, handler or statement sees it.
 */
export function assertStorable(params: Record<string, string>, query: Record<string, unknown>, body: unknown, headers: Record<string, string>): void {
  let problem = unstorableProblem(params, 'path') ?? unstorableProblem(query, 'query') ?? unstorableProblem(body, 'body');
  for (const [name, label] of STORED_HEADERS) {
    const value = headers[name];
    if (problem === undefined && value !== undefined) problem = unstorableProblem(value, label);
  }
  if (problem !== undefined) throw new ApiError('validation_error', problem);
}
