import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { TSchema } from '@sinclair/typebox';

// ajv-formats is CommonJS with a default export; under NodeNext its callable sits on .default.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv, options?: { mode: 'fast' | 'full' }) => Ajv;

function createAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({ allErrors: false, coerceTypes, useDefaults: true, strict: false });
  addFormats(ajv);
  return ajv;
}

/** Bodies are validated as sent; query strings and path parameters arrive as text and are coerced. */
export const bodyAjv = createAjv(false);
export const textAjv = createAjv(true);
/**
 * Responses are checked without touching them: no defaults filled in, no coercion. They are our own
 * output, so formats are checked in ajv-formats' fast mode (simpler expressions; `uri`'s full RFC 3986
 * expression alone cost about 5% of a small GET).
 */
const responseAjv = new Ajv({ allErrors: false, strict: false });
addFormats(responseAjv, { mode: 'fast' });

export type Validator = ValidateFunction;

export function compileBody(schema: TSchema): Validator {
  return bodyAjv.compile(schema);
}

export function compileText(schema: TSchema): Validator {
  return textAjv.compile(schema);
}

export function compileResponse(schema: TSchema): Validator {
  return responseAjv.compile(schema);
}

/** One line naming the field and what is wrong with it, for the validation_error message. */
export function describeErrors(where: string, errors: ErrorObject[] | null | undefined): string {
  const error = errors?.[0];
  if (!error) return `${where} is not valid`;
  const field = fieldName(where, error);
  switch (error.keyword) {
    case 'additionalProperties':
      return `${field}: unknown field "${String((error.params as { additionalProperty: string }).additionalProperty)}"`;
    case 'required':
      return `${where}${error.instancePath.replace(/\//g, '.')}.${String((error.params as { missingProperty: string }).missingProperty)}: is required`;
    case 'enum':
      return `${field}: must be one of ${((error.params as { allowedValues: unknown[] }).allowedValues).map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return `${field}: ${error.message ?? 'is not valid'}`;
  }
}

function fieldName(where: string, error: ErrorObject): string {
  return error.instancePath ? `${where}${error.instancePath.replace(/\//g, '.')}` : where;
}
