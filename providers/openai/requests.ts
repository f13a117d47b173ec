import { PROVIDER_ERROR_CODES, ProviderFailure } from '../adapter.ts';
import type { ChatCompletionCreateParamsNonStreaming, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
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

const CHAT_ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

/**
 * The chat body: `params.messages` (a conversation, as OpenAI takes it) when present, else `systemPrompt`
 * as a system message and `prompt` as the user message; then the sampling fields. `topP`, `stop`, `user`,
 * `responseFormat`, `tools` and `toolChoice` go as they are, under OpenAI's names, when present. Streaming
 * (`stream`, `stream_options`) is the adapter's to add.
 */
export function chatRequest(target: OpenAiDeploymentTarget, params: Record<string, unknown>): ChatCompletionCreateParamsNonStreaming {
  const maxTokens = num(params.maxTokens);
  const temperature = num(params.temperature);
  const seed = num(params.seed);
  const topP = num(params.topP);
  const stop = stopOf(params.stop);
  const user = typeof params.user === 'string' ? params.user : undefined;
  const field = target.tokenLimitField ?? (REASONING_FAMILY.test(target.model) ? 'max_completion_tokens' : 'max_tokens');
  return {
    model: target.model,
    messages: chatMessages(params),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(topP !== undefined ? { top_p: topP } : {}),
    ...(maxTokens !== undefined ? { [field]: maxTokens } : {}),
    ...(seed !== undefined ? { seed } : {}),
    ...(stop !== undefined ? { stop } : {}),
    ...(user !== undefined ? { user } : {}),
    ...(params.responseFormat !== undefined ? { response_format: params.responseFormat as ChatCompletionCreateParamsNonStreaming['response_format'] } : {}),
    ...(params.tools !== undefined ? { tools: params.tools as ChatCompletionCreateParamsNonStreaming['tools'] } : {}),
    ...(params.toolChoice !== undefined ? { tool_choice: params.toolChoice as ChatCompletionCreateParamsNonStreaming['tool_choice'] } : {}),
  };
}

function stopOf(value: unknown): string | string[] | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return value as string[];
  throw refused('The chat parameter stop must be a string or an array of strings.');
}

/** The conversation sent: each message with the fields OpenAI takes for its role, nothing else. */
function chatMessages(params: Record<string, unknown>): ChatCompletionMessageParam[] {
  if (params.messages === undefined) {
    const system = text(params.systemPrompt);
    return [...(system ? [{ role: 'system' as const, content: system }] : []), { role: 'user' as const, content: text(params.prompt) }];
  }
  if (!Array.isArray(params.messages) || params.messages.length === 0) throw refused('The chat messages must be a non-empty array.');
  return params.messages.map((item: unknown, i) => {
    const m = (item ?? {}) as { role?: unknown; content?: unknown; name?: unknown; tool_call_id?: unknown; tool_calls?: unknown };
    if (typeof m.role !== 'string' || !CHAT_ROLES.has(m.role))
      throw refused(`The chat message ${i} has the role ${String(m.role)}; roles are system, developer, user, assistant and tool.`);
    if (typeof m.content !== 'string') throw refused(`The chat message ${i} has no text content.`);
    const name = typeof m.name === 'string' && m.role !== 'tool' ? { name: m.name } : {};
    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || !m.tool_call_id) throw refused(`The chat message ${i} (a tool's answer) has no tool_call_id.`);
      return { role: 'tool', content: m.content, tool_call_id: m.tool_call_id };
    }
    if (m.role === 'assistant' && Array.isArray(m.tool_calls)) {
      return { role: 'assistant', content: m.content, ...name, tool_calls: m.tool_calls as never };
    }
    return { role: m.role as 'system' | 'developer' | 'user' | 'assistant', content: m.content, ...name };
  });
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
