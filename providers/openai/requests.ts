import { PROVIDER_ERROR_CODES, ProviderFailure } from '../adapter.ts';
import type { ImageGenerateParamsNonStreaming } from 'openai/resources/images';
import type { OpenAiDeploymentTarget } from './deployment.ts';

/**
 * Our standard parameters as the bodies OpenAI's endpoints document (platform.openai.com/docs/api-reference,
 * openai-node src/resources/{chat/completions,images,audio/speech}.ts). Pure: what cannot be sent is a
 * ProviderFailure (input rejected) before any call.
 */

const REASONING_FAMILY = /^(o\d|gpt-5)/i;
const GPT_IMAGE_FAMILY = /^(gpt-image|chatgpt-image)/i;

/** Sizes by model family; DALL·E 2 makes squares only, so other ratios have no size there. */
const SIZES: Record<'gpt-image' | 'dall-e-3' | 'dall-e-2', Record<string, string>> = {
  'gpt-image': { '1:1': '1024x1024', '16:9': '1536x1024', '21:9': '1536x1024', '4:3': '1536x1024', '9:16': '1024x1536', '3:4': '1024x1536' },
  'dall-e-3': { '1:1': '1024x1024', '16:9': '1792x1024', '21:9': '1792x1024', '4:3': '1792x1024', '9:16': '1024x1792', '3:4': '1024x1792' },
  'dall-e-2': { '1:1': '1024x1024' },
};

/** Our voices onto OpenAI's built-in ones (each exists for tts-1, tts-1-hd and gpt-4o-mini-tts). */
export const OPENAI_VOICES: Record<string, string> = { alloy: 'alloy', ember: 'coral', sage: 'sage', nova: 'nova' };

/** Our audio formats onto speech's response_format: ogg is Opus in an Ogg container. */
export const OPENAI_AUDIO_FORMATS: Record<string, { responseFormat: 'mp3' | 'wav' | 'opus'; contentType: string }> = {
  mp3: { responseFormat: 'mp3', contentType: 'audio/mpeg' },
  wav: { responseFormat: 'wav', contentType: 'audio/wav' },
  ogg: { responseFormat: 'opus', contentType: 'audio/ogg' },
};

const refused = (message: string) => new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, message);
const text = (value: unknown) => (typeof value === 'string' ? value : '');
const num = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

export function chatRequest(target: OpenAiDeploymentTarget, params: Record<string, unknown>) {
  const system = text(params.systemPrompt);
  const maxTokens = num(params.maxTokens);
  const temperature = num(params.temperature);
  const seed = num(params.seed);
  const field = target.tokenLimitField ?? (REASONING_FAMILY.test(target.model) ? 'max_completion_tokens' : 'max_tokens');
  return {
    model: target.model,
    messages: [...(system ? [{ role: 'system' as const, content: system }] : []), { role: 'user' as const, content: text(params.prompt) }],
    ...(temperature !== undefined ? { temperature } : {}),
    ...(maxTokens !== undefined ? { [field]: maxTokens } : {}),
    ...(seed !== undefined ? { seed } : {}),
  };
}

export function isGptImageModel(model: string): boolean {
  return GPT_IMAGE_FAMILY.test(model);
}

/** The client's type lists OpenAI's sizes; a compatible server's own sizes (deployment `sizes`) pass as they are. */
type ImageSize = NonNullable<ImageGenerateParamsNonStreaming['size']>;

export function imageSize(target: OpenAiDeploymentTarget, params: Record<string, unknown>): ImageSize {
  const ratio = text(params.aspectRatio) || '1:1';
  const table =
    target.sizes ??
    (isGptImageModel(target.model)
      ? SIZES['gpt-image']
      : /^dall-e-2$/i.test(target.model)
        ? SIZES['dall-e-2']
        : /^dall-e-3$/i.test(target.model)
          ? SIZES['dall-e-3']
          : SIZES['gpt-image']);
  const size = table[ratio];
  if (!size) throw refused(`The model ${target.model} has no image size for the aspect ratio ${ratio} (it takes ${Object.keys(table).join(', ')}).`);
  return size as ImageSize;
}

/** The response_format to send, or undefined to leave it out (the GPT image models refuse it). */
export function imageResponseFormat(target: OpenAiDeploymentTarget): 'b64_json' | 'url' | undefined {
  const chosen = target.imageResponseFormat ?? (isGptImageModel(target.model) ? 'none' : 'b64_json');
  return chosen === 'none' ? undefined : chosen;
}

export function imageCount(params: Record<string, unknown>): number {
  return num(params.numImages) ?? 1;
}

export function imageGenerateRequest(target: OpenAiDeploymentTarget, params: Record<string, unknown>) {
  const responseFormat = imageResponseFormat(target);
  return {
    model: target.model,
    prompt: text(params.prompt),
    n: imageCount(params),
    size: imageSize(target, params),
    ...(responseFormat ? { response_format: responseFormat } : {}),
    ...(target.quality ? { quality: target.quality } : {}),
    ...(target.style ? { style: target.style } : {}),
  };
}

export function speechRequest(target: OpenAiDeploymentTarget, params: Record<string, unknown>) {
  const voice = text(params.voice) || 'alloy';
  const upstreamVoice = target.voices?.[voice] ?? OPENAI_VOICES[voice];
  if (!upstreamVoice) throw refused(`The voice ${voice} has no OpenAI voice.`);
  const format = OPENAI_AUDIO_FORMATS[text(params.format) || 'mp3'];
  if (!format) throw refused(`The audio format ${text(params.format)} is not one OpenAI makes (mp3, wav, ogg).`);
  const speed = num(params.speed);
  return {
    body: {
      model: target.model,
      input: text(params.prompt),
      voice: upstreamVoice,
      response_format: format.responseFormat,
      ...(speed !== undefined ? { speed } : {}),
    },
    contentType: format.contentType,
  };
}
