import type { OutputFile } from '../provider.ts';
import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage, type AdapterUpdate, type TokenUsage } from '../adapter.ts';
import { imageDimensions, sniffContentType } from '../local/sniff.ts';

/**
 * OpenAI's answers as our updates, checked against the documented shapes (openai-node
 * src/resources/chat/completions/completions.ts ChatCompletion, src/resources/images.ts ImagesResponse).
 * Anything else is provider_bad_response; every file is typed from its bytes, never from what was claimed.
 */

/** What an answer read whole makes: the job's success (anything else throws). */
type Succeeded = Extract<AdapterUpdate, { type: 'succeeded' }>;

const bad = (message: string) => new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, message);

function tokenCount(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

export function chatUpdate(answer: unknown, secrets: readonly string[]): Succeeded {
  const body = answer as { choices?: unknown; usage?: unknown } | null;
  if (!body || typeof body !== 'object' || !Array.isArray(body.choices) || body.choices.length === 0) {
    throw bad("The provider's chat answer has no choices.");
  }
  const choice = body.choices[0] as { finish_reason?: unknown; message?: { content?: unknown; refusal?: unknown } };
  if (choice?.finish_reason === 'content_filter') {
    throw new ProviderFailure(PROVIDER_ERROR_CODES.contentPolicy, "OpenAI's content filter stopped the answer (finish_reason content_filter).");
  }
  const refusal = choice?.message?.refusal;
  if (typeof refusal === 'string' && refusal) {
    throw new ProviderFailure(PROVIDER_ERROR_CODES.contentPolicy, `The model refused: ${upstreamMessage(refusal, secrets)}`);
  }
  const content = choice?.message?.content;
  if (typeof content !== 'string') throw bad("The provider's chat answer has no choices[0].message.content.");
  const usage = body.usage !== undefined && body.usage !== null ? usageOf(body.usage) : undefined;
  return { type: 'succeeded', textOutput: content, files: [], ...(usage ? { usage } : {}) };
}

/**
 * A streamed chat answer read chunk by chunk (openai-node ChatCompletionChunk; the final chunk of
 * `stream_options.include_usage` has empty `choices` and the usage, every earlier one `usage: null`).
 * `take` returns each chunk's piece of the answer (choice 0's `delta.content`); `end` makes the job's
 * update once the stream is over. A chunk that is not what the API documents is provider_bad_response.
 */
export class ChatStreamReading {
  /** The usage chunk's counts, once it arrived. */
  usage: TokenUsage | undefined;
  private readonly pieces: string[] = [];
  private refusal = '';
  private finishReason: string | undefined;

  constructor(private readonly secrets: readonly string[]) {}

  take(chunk: unknown): string | undefined {
    const body = chunk as { choices?: unknown; usage?: unknown } | null;
    if (!body || typeof body !== 'object' || !Array.isArray(body.choices)) throw bad("A chunk of the provider's chat stream has no choices.");
    if (body.usage !== undefined && body.usage !== null) this.usage = usageOf(body.usage);
    let piece: string | undefined;
    for (const item of body.choices as Array<{ index?: unknown; delta?: { content?: unknown; refusal?: unknown }; finish_reason?: unknown }>) {
      if (!item || typeof item !== 'object' || (item.index !== undefined && item.index !== 0)) continue;
      const content = item.delta?.content;
      if (typeof content === 'string' && content) {
        this.pieces.push(content);
        piece = (piece ?? '') + content;
      }
      if (typeof item.delta?.refusal === 'string') this.refusal += item.delta.refusal;
      if (typeof item.finish_reason === 'string') this.finishReason = item.finish_reason;
    }
    return piece;
  }

  /** The job's end: the pieces joined, with the usage; a failure when the stream stopped short or was refused. */
  end(): Succeeded {
    if (this.finishReason === 'content_filter') {
      throw new ProviderFailure(PROVIDER_ERROR_CODES.contentPolicy, "OpenAI's content filter stopped the answer (finish_reason content_filter).");
    }
    if (this.refusal) throw new ProviderFailure(PROVIDER_ERROR_CODES.contentPolicy, `The model refused: ${upstreamMessage(this.refusal, this.secrets)}`);
    if (this.finishReason === undefined) throw bad("The provider's chat stream ended before its answer did (no finish_reason).");
    return { type: 'succeeded', textOutput: this.pieces.join(''), files: [], ...(this.usage ? { usage: this.usage } : {}) };
  }
}

function usageOf(value: unknown): TokenUsage {
  const u = value as { prompt_tokens?: unknown; completion_tokens?: unknown };
  const inputTokens = tokenCount(u?.prompt_tokens);
  const outputTokens = tokenCount(u?.completion_tokens);
  // The job's price follows the usage: a count we cannot read is not guessed.
  if (inputTokens === undefined || outputTokens === undefined) throw bad("The provider's usage has no whole prompt_tokens and completion_tokens.");
  return { inputTokens, outputTokens };
}

export interface ImageOutputLimits {
  count: number;
  maxOutputBytes: number;
  fetchOutput(url: string): Promise<Buffer>;
  signal: AbortSignal;
}

export async function imagesUpdate(answer: unknown, limits: ImageOutputLimits, secrets: readonly string[]): Promise<Succeeded> {
  const body = answer as { data?: unknown; usage?: unknown } | null;
  if (!body || typeof body !== 'object' || !Array.isArray(body.data) || body.data.length === 0) {
    throw bad("The provider's answer has no images (data is empty).");
  }
  // Every image asked for is priced, so fewer is a failure, not a partial success.
  if (body.data.length < limits.count) throw bad(`The provider answered with ${body.data.length} of the ${limits.count} images asked for.`);
  const files: OutputFile[] = [];
  for (const item of body.data.slice(0, limits.count) as Array<{ b64_json?: unknown; url?: unknown }>) {
    const bytes =
      typeof item?.b64_json === 'string'
        ? decodeBase64(item.b64_json, limits.maxOutputBytes)
        : typeof item?.url === 'string'
          ? await fetchImage(item.url, limits, secrets)
          : undefined;
    if (!bytes) throw bad("An image in the provider's answer has neither b64_json nor url.");
    if (limits.signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The job was stopped.');
    const contentType = sniffContentType(bytes);
    if (!contentType?.startsWith('image/')) throw bad("An image in the provider's answer is not a PNG, JPEG, GIF or WEBP file.");
    const size = imageDimensions(bytes);
    files.push({ bytes, contentType, mediaType: 'image', ...(size ? { width: size.width, height: size.height } : {}) });
  }
  const u = body.usage as { input_tokens?: unknown; output_tokens?: unknown } | undefined;
  const inputTokens = tokenCount(u?.input_tokens);
  const outputTokens = tokenCount(u?.output_tokens);
  const usage = inputTokens !== undefined && outputTokens !== undefined ? { inputTokens, outputTokens } : undefined;
  return { type: 'succeeded', files, ...(usage ? { usage } : {}) };
}

function decodeBase64(encoded: string, maxBytes: number): Buffer {
  const clean = encoded.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) throw bad("An image's b64_json in the provider's answer is not base64.");
  if (Math.floor((clean.length * 3) / 4) - 2 > maxBytes) throw bad(`An image in the provider's answer is larger than ${maxBytes} bytes.`);
  return Buffer.from(clean, 'base64');
}

async function fetchImage(url: string, limits: ImageOutputLimits, secrets: readonly string[]): Promise<Buffer> {
  try {
    return await limits.fetchOutput(url);
  } catch (error) {
    throw new ProviderFailure(
      PROVIDER_ERROR_CODES.outputFetch,
      `The image at the URL the provider gave could not be fetched: ${upstreamMessage((error as Error).message ?? String(error), secrets)}`,
    );
  }
}

/** The speech answer's bytes, which must be the container asked for (the sniffed type, not the header). */
export function speechUpdate(bytes: Buffer, contentType: string, maxOutputBytes: number): Succeeded {
  if (bytes.length === 0) throw bad('The provider answered with no audio.');
  if (bytes.length > maxOutputBytes) throw bad(`The provider's audio is larger than ${maxOutputBytes} bytes.`);
  const sniffed = sniffContentType(bytes);
  if (sniffed !== contentType) throw bad(`The provider's audio is ${sniffed ?? 'of no known type'}, not the ${contentType} asked for.`);
  return { type: 'succeeded', files: [{ bytes, contentType, mediaType: 'audio' }] };
}
