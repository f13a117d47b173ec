import { Type, type TSchema } from '@sinclair/typebox';

/** The generation parameters of SPEC.md section 2, each with its bounds; models pick the ones they take. */
export const ASPECT_RATIOS = ['1:1', '16:9', '9:16', '4:3', '3:4', '21:9'] as const;
export const AUDIO_FORMATS = ['mp3', 'wav', 'ogg'] as const;
export const VOICES = ['alloy', 'ember', 'sage', 'nova'] as const;

/** A string enum as plain JSON Schema `enum`, so a refusal lists the allowed values. */
export const stringEnum = <T extends string>(values: readonly T[], options: Record<string, unknown> = {}) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...options });

export const Param = {
  prompt: Type.String({ minLength: 1, maxLength: 4000, description: 'What to generate.' }),
  negativePrompt: Type.String({ maxLength: 2000, description: 'What to avoid.' }),
  seed: Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'Same seed and inputs, same output.' }),
  aspectRatio: stringEnum(ASPECT_RATIOS, { default: '1:1', description: 'Width to height.' }),
  strength: Type.Number({ minimum: 0, maximum: 1, default: 0.6, description: 'How far the output departs from the input.' }),
  numImages: Type.Integer({ minimum: 1, maximum: 4, default: 1, description: 'Images to make; each is charged.' }),
  voice: stringEnum(VOICES, { default: 'alloy' }),
  speed: Type.Number({ minimum: 0.5, maximum: 2, default: 1 }),
  format: stringEnum(AUDIO_FORMATS, { default: 'mp3' }),
  systemPrompt: Type.String({ maxLength: 4000 }),
  temperature: Type.Number({ minimum: 0, maximum: 2, default: 1 }),
  maxTokens: Type.Integer({ minimum: 1, maximum: 4096, default: 256 }),
  durationSeconds: (max: number, fallback: number) =>
    Type.Number({ exclusiveMinimum: 0, maximum: max, default: fallback, description: `Length of the output in seconds, at most ${max}.` }),
};

/** A model's parameterSchema: the named params, `prompt` required where given, nothing unknown allowed. */
export function paramsSchema(properties: Record<string, TSchema>, required: string[] = ['prompt']): TSchema {
  const shaped: Record<string, TSchema> = {};
  for (const [name, schema] of Object.entries(properties)) shaped[name] = required.includes(name) ? schema : Type.Optional(schema);
  return Type.Object(shaped, { additionalProperties: false });
}
