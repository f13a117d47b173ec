import { ApiError } from '../errors.ts';

/** application/json and the structured suffix types (application/merge-patch+json, …), with or without parameters. */
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** A body read whole, parsed as JSON: sent as JSON, not empty, and valid, else a validation_error saying which. */
export function parseJson(raw: Buffer, contentType: string | undefined): unknown {
  if (!contentType || !JSON_TYPE.test(contentType)) {
    throw new ApiError('validation_error', 'The request body must be JSON, sent with Content-Type: application/json.');
  }
  if (raw.length === 0) throw new ApiError('validation_error', 'A JSON request body is required.');
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError('validation_error', 'The request body is not valid JSON.');
  }
}
