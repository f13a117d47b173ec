import { Type, type TSchema } from '@sinclair/typebox';

/** The generation parameters every model picks from (docs/catalog.md), each with its widest bounds. */
export const ASPECT_RATIOS = ['1:1', '16:9', '9:16', '4:3', '3:4', '21:9'] as const;
export const AUDIO_FORMATS = ['mp3', 'wav', 'ogg'] as const;
export const VOICES = ['alloy', 'ember', 'sage', 'nova'] as const;

/** A string enum as plain JSON Schema `enum`, so a refusal lists the allowed values. */
export const stringEnum = <T extends string>(values: readonly T[], options: Record<string, unknown> = {}) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...options });

type Kind = 'string' | 'integer' | 'number' | 'enum';

/** One standard parameter: its type, its widest bounds, and the default and description a model gets unless it says otherwise. */
export interface StandardParameter {
  kind: Kind;
  minimum?: number;
  maximum?: number;
  /** durationSeconds: above zero, not zero. */
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  values?: readonly string[];
  default?: number | string;
  description?: string;
}

export const STANDARD_PARAMETERS = {
  prompt: { kind: 'string', minLength: 1, maxLength: 4000, description: 'What to generate.' },
  negativePrompt: { kind: 'string', maxLength: 2000, description: 'What to avoid.' },
  seed: { kind: 'integer', minimum: 0, maximum: 2_147_483_647, description: 'Same seed and inputs, same output.' },
  aspectRatio: { kind: 'enum', values: ASPECT_RATIOS, default: '1:1', description: 'Width to height.' },
  strength: { kind: 'number', minimum: 0, maximum: 1, default: 0.6, description: 'How far the output departs from the input.' },
  numImages: { kind: 'integer', minimum: 1, maximum: 4, default: 1, description: 'Images to make; each is charged.' },
  voice: { kind: 'enum', values: VOICES, default: 'alloy' },
  speed: { kind: 'number', minimum: 0.5, maximum: 2, default: 1 },
  format: { kind: 'enum', values: AUDIO_FORMATS, default: 'mp3' },
  systemPrompt: { kind: 'string', maxLength: 4000 },
  temperature: { kind: 'number', minimum: 0, maximum: 2, default: 1 },
  maxTokens: { kind: 'integer', minimum: 1, maximum: 1_000_000, default: 256 },
  durationSeconds: { kind: 'number', exclusiveMinimum: 0, maximum: 3_600 },
} as const satisfies Record<string, StandardParameter>;

export type ParameterName = keyof typeof STANDARD_PARAMETERS;
export const PARAMETER_NAMES = Object.keys(STANDARD_PARAMETERS) as ParameterName[];

export function isParameterName(name: string): name is ParameterName {
  return Object.hasOwn(STANDARD_PARAMETERS, name);
}

/** What a model says of one parameter it offers (the catalog file's `parameters` entries). */
export interface ParameterChoice {
  required?: boolean;
  default?: number | string | boolean;
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  enum?: string[];
  description?: string;
}

/**
 * The JSON Schema of one offered parameter: the standard's, narrowed by the model's choice. Problems (a bound
 * past the standard's, a default outside the bounds, an enum value the standard lacks) are pushed, each
 * naming the field.
 */
export function parameterSchema(name: ParameterName, choice: ParameterChoice, problems: string[], at: string): TSchema {
  const standard: StandardParameter = STANDARD_PARAMETERS[name];
  const out: Record<string, unknown> = {};
  const bound = (key: 'minimum' | 'maximum', value: number | undefined) => {
    if (value === undefined) return;
    const low = standard.minimum ?? standard.exclusiveMinimum;
    if (standard.kind === 'string' || standard.kind === 'enum') return problems.push(`${at}.${key}: ${name} is not a number`);
    if (
      (low !== undefined && (value < low || (standard.exclusiveMinimum !== undefined && value <= standard.exclusiveMinimum))) ||
      (standard.maximum !== undefined && value > standard.maximum)
    ) {
      return problems.push(`${at}.${key}: ${value} is outside ${name}'s bounds (${low ?? '-∞'} to ${standard.maximum ?? '∞'})`);
    }
    if (standard.kind === 'integer' && !Number.isInteger(value)) return problems.push(`${at}.${key}: ${name} takes whole numbers`);
  };
  bound('minimum', choice.minimum);
  bound('maximum', choice.maximum);
  if (choice.minimum !== undefined && choice.maximum !== undefined && choice.minimum > choice.maximum) problems.push(`${at}: minimum is above maximum`);
  switch (standard.kind) {
    case 'string': {
      if (choice.enum) problems.push(`${at}.enum: ${name} is free text, it takes no enum`);
      const maxLength = choice.maxLength ?? standard.maxLength;
      if (choice.maxLength !== undefined && standard.maxLength !== undefined && choice.maxLength > standard.maxLength) {
        problems.push(`${at}.maxLength: ${choice.maxLength} is above ${name}'s ${standard.maxLength}`);
      }
      Object.assign(
        out,
        { type: 'string' },
        standard.minLength !== undefined ? { minLength: standard.minLength } : {},
        maxLength !== undefined ? { maxLength } : {},
      );
      break;
    }
    case 'enum': {
      if (choice.maxLength !== undefined) problems.push(`${at}.maxLength: ${name} is one of a list, it takes no maxLength`);
      const values = choice.enum ?? [...standard.values!];
      for (const value of values)
        if (!standard.values!.includes(value)) problems.push(`${at}.enum: "${value}" is not a ${name} (${standard.values!.join(', ')})`);
      Object.assign(out, { type: 'string', enum: values });
      break;
    }
    default: {
      if (choice.enum || choice.maxLength !== undefined) problems.push(`${at}: ${name} is a number, it takes minimum, maximum and default only`);
      out.type = standard.kind;
      if (standard.exclusiveMinimum !== undefined && choice.minimum === undefined) out.exclusiveMinimum = standard.exclusiveMinimum;
      const minimum = choice.minimum ?? standard.minimum;
      const maximum = choice.maximum ?? standard.maximum;
      if (minimum !== undefined) out.minimum = minimum;
      if (maximum !== undefined) out.maximum = maximum;
    }
  }
  const fallback = choice.default ?? standard.default;
  if (fallback !== undefined) {
    if (!defaultFits(out, fallback)) problems.push(`${at}.default: ${JSON.stringify(fallback)} is not a valid ${name}`);
    out.default = fallback;
  }
  const description =
    choice.description ?? (name === 'durationSeconds' ? `Length of the output in seconds, at most ${String(out.maximum)}.` : standard.description);
  if (description !== undefined) out.description = description;
  return Type.Unsafe(out);
}

function defaultFits(schema: Record<string, unknown>, value: unknown): boolean {
  if (schema.type === 'string') {
    if (typeof value !== 'string') return false;
    if (Array.isArray(schema.enum)) return schema.enum.includes(value);
    return value.length >= Number(schema.minLength ?? 0) && value.length <= Number(schema.maxLength ?? Infinity);
  }
  if (typeof value !== 'number' || (schema.type === 'integer' && !Number.isInteger(value))) return false;
  if (schema.exclusiveMinimum !== undefined && value <= Number(schema.exclusiveMinimum)) return false;
  return value >= Number(schema.minimum ?? -Infinity) && value <= Number(schema.maximum ?? Infinity);
}

/** A model's parameterSchema: the offered parameters, the required ones named, nothing unknown allowed. */
export function paramsSchema(properties: Record<string, TSchema>, required: string[]): TSchema {
  const shaped: Record<string, TSchema> = {};
  for (const [name, schema] of Object.entries(properties)) shaped[name] = required.includes(name) ? schema : Type.Optional(schema);
  return Type.Object(shaped, { additionalProperties: false });
}
