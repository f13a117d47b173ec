import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { TSchema } from '@sinclair/typebox';
import { isUnstorable } from '../persistence/storable-text.ts';

// ajv-formats is CommonJS with a default export; under NodeNext its callable sits on .default.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv,
  options?: { mode: 'fast' | 'full' },
) => Ajv;

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

/** JSON nested deeper than this is refused: no schema of ours goes near it, and deeper values overflow the stack of whatever copies them. */
export const MAX_JSON_DEPTH = 32;

/**
 * What makes a parsed request part (path parameters, query, a JSON body, free-form objects included) unfit
 * to store, as a validation_error message naming the field (`body.params.style: …`); undefined when it is
 * fine. A string or property name holding U+0000 or an unpaired surrogate, or nesting deeper than
 * MAX_JSON_DEPTH. Walks with its own stack, so no input can overflow the call stack here.
 */
export function unstorableProblem(value: unknown, where: string): string | undefined {
  const bad = (field: string) => `${field}: must not contain U+0000 or an unpaired surrogate`;
  if (typeof value === 'string') return isUnstorable(value) ? bad(where) : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  const stack: Array<{ node: object; path: string; depth: number }> = [{ node: value, path: where, depth: 1 }];
  while (stack.length > 0) {
    const { node, path, depth } = stack.pop()!;
    if (depth > MAX_JSON_DEPTH) return `${path}: nested more than ${MAX_JSON_DEPTH} levels deep`;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const item: unknown = node[i];
        if (typeof item === 'string') {
          if (isUnstorable(item)) return bad(`${path}.${i}`);
        } else if (typeof item === 'object' && item !== null) {
          stack.push({ node: item, path: `${path}.${i}`, depth: depth + 1 });
        }
      }
      continue;
    }
    for (const key in node) {
      if (isUnstorable(key)) return bad(`${path} (a property name)`);
      const item: unknown = (node as Record<string, unknown>)[key];
      if (typeof item === 'string') {
        if (isUnstorable(item)) return bad(`${path}.${key}`);
      } else if (typeof item === 'object' && item !== null) {
        stack.push({ node: item, path: `${path}.${key}`, depth: depth + 1 });
      }
    }
  }
  return undefined;
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
      return `${field}: must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return `${field}: ${error.message ?? 'is not valid'}`;
  }
}

function fieldName(where: string, error: ErrorObject): string {
  return error.instancePath ? `${where}${error.instancePath.replace(/\//g, '.')}` : where;
}
