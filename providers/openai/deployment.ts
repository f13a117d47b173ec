import { Type, type Static } from '@sinclair/typebox';
import { ASPECT_RATIOS, VOICES } from '../../domain/catalog/params.ts';

/** A string among `values`, as literals so that both ajv and TypeBox's Value check it. */
const oneOf = <T extends string>(values: readonly T[]) => Type.Union(values.map((value) => Type.Literal(value)));

const size = Type.String({ pattern: '^(\\d{2,5}x\\d{2,5}|auto)$', description: 'WIDTHxHEIGHT as the images API takes it, or auto.' });

/**
 * What a catalog deployment of kind `openai` names: the upstream model, and optionally how our parameters
 * reach it. Which API a job calls follows from the model's mode in the catalog (text_to_text: chat
 * completions, text_to_image: images/generations, image_to_image: images/edits, text_to_audio:
 * audio/speech).
 */
export const openaiDeploymentTarget = Type.Object(
  {
    /** The upstream model: gpt-4o-mini, o4-mini, gpt-image-1, dall-e-3, tts-1, or a compatible server's own name. */
    model: Type.String({ minLength: 1, maxLength: 200 }),
    /** Images: the quality the model takes (dall-e-3: standard or hd; GPT image models: low, medium, high, auto). */
    quality: Type.Optional(oneOf(['standard', 'hd', 'low', 'medium', 'high', 'auto'] as const)),
    /** Images, dall-e-3 only: vivid or natural. */
    style: Type.Optional(oneOf(['vivid', 'natural'] as const)),
    /**
     * Chat: which field carries maxTokens. Default: max_completion_tokens for the reasoning families (o1, o3,
     * o4, gpt-5), which refuse max_tokens; max_tokens otherwise, which every compatible server reads.
     */
    tokenLimitField: Type.Optional(oneOf(['max_tokens', 'max_completion_tokens'] as const)),
    /**
     * Chat: whether the answer is streamed (`stream: true` with `stream_options.include_usage`), its pieces
     * reported as they arrive. Default true; false for a compatible server that cannot stream, which then
     * gets one call answered whole.
     */
    stream: Type.Optional(Type.Boolean()),
    /**
     * Images: the response_format sent. Default: b64_json, and none for the GPT image models (they always
     * answer base64 and refuse the field). `url` answers are fetched through the egress guard.
     */
    imageResponseFormat: Type.Optional(oneOf(['b64_json', 'url', 'none'] as const)),
    /** Images: the size sent for each aspect ratio, replacing the model family's table (a ratio left out is refused). */
    sizes: Type.Optional(Type.Partial(Type.Object(Object.fromEntries(ASPECT_RATIOS.map((ratio) => [ratio, size]))), { additionalProperties: false })),
    /** Speech: the upstream voice for each of ours, replacing the default map (a compatible server's own voices). */
    voices: Type.Optional(
      Type.Partial(Type.Object(Object.fromEntries(VOICES.map((voice) => [voice, Type.String({ minLength: 1, maxLength: 100 })]))), {
        additionalProperties: false,
      }),
    ),
  },
  { additionalProperties: false },
);

export type OpenAiDeploymentTarget = Static<typeof openaiDeploymentTarget>;
