import { Ajv, type ValidateFunction } from 'ajv';
import type { TSchema } from '@sinclair/typebox';

/**
 * Each model's params validator, compiled once per distinct parameterSchema for the life of the process.
 * Models of one catalog often share a schema (the same parameters and bounds), and a reload mostly brings the
 * schemas of the version before: compiling each model on every build made a catalog of 2,000 models block
 * the event loop for seconds at each reload, and Ajv, which keeps every schema it compiled, grew by the
 * whole catalog's validators at each one. Kept here, what a reload adds is the schemas it is the first to use.
 */
const ajv = new Ajv({ allErrors: false, useDefaults: true, strict: false, coerceTypes: false });
const compiled = new Map<string, ValidateFunction>();

/** The validator of a params schema (fills defaults into what it checks); throws when the schema is not valid. */
export function paramsValidator(schema: TSchema): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(key, validate);
  }
  return validate;
}

/** How many distinct schemas have been compiled (for the tests of the above). */
export function compiledSchemaCount(): number {
  return compiled.size;
}
