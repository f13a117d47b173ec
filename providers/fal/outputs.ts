import type { Mode } from '../../domain/catalog/models.ts';
import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage, type AdapterContext } from '../adapter.ts';
import { imageDimensions, sniffContentType } from '../local/sniff.ts';
import type { OutputFile } from '../provider.ts';

/**
 * A completed fal result (the result URL's JSON, or a webhook's `payload`) as our outputs. fal's apps answer
 * files as objects with a `url` (https://docs.fal.ai/model-endpoints/webhooks shows `images[]`):
 * `images[]` or `image` for images, `video` for video, `audio` or `audio_file` for audio; text apps answer
 * a string field. Every file is fetched through the egress guard (data URLs, which apps in sync mode answer,
 * are decoded here), bounded in size, and typed by its bytes, never by what the answer says.
 */
export type MediaKind = 'image' | 'video' | 'audio';

/** More files than this in one answer is not a generation's output. */
const MAX_FILES = 16;

export function mediaOf(mode: Mode): MediaKind | 'text' {
  if (mode === 'text_to_image' || mode === 'image_to_image') return 'image';
  if (mode === 'text_to_video' || mode === 'image_to_video' || mode === 'video_to_video') return 'video';
  if (mode === 'text_to_audio') return 'audio';
  return 'text';
}

export interface FalOutputs {
  textOutput?: string;
  files: OutputFile[];
}

export async function readOutputs(
  result: unknown,
  mode: Mode,
  textField: string | undefined,
  context: AdapterContext,
  secrets: readonly string[],
): Promise<FalOutputs> {
  if (!result || typeof result !== 'object' || Array.isArray(result)) throw bad('The fal result is not a JSON object.');
  const fields = result as Record<string, unknown>;
  const media = mediaOf(mode);
  if (media === 'text') {
    const names = textField ? [textField] : ['output', 'text', 'response'];
    const name = names.find((candidate) => typeof fields[candidate] === 'string');
    if (name === undefined) throw bad(`The fal result has no text (looked for ${names.join(', ')}).`);
    return { textOutput: fields[name] as string, files: [] };
  }
  const urls = fileUrls(fields, media);
  if (urls.length === 0) throw bad(`The fal result holds no ${media} URL.`);
  if (urls.length > MAX_FILES) throw bad(`The fal result holds ${urls.length} files, more than ${MAX_FILES}.`);
  const files: OutputFile[] = [];
  for (const [index, url] of urls.entries()) files.push(typed(await download(url, index, context, secrets), media, index));
  return { files };
}

function fileUrls(fields: Record<string, unknown>, media: MediaKind): unknown[] {
  const urlOf = (file: unknown) => (file && typeof file === 'object' ? (file as { url?: unknown }).url : undefined);
  const listed = (value: unknown) => (Array.isArray(value) ? value.map(urlOf) : value === undefined || value === null ? [] : [urlOf(value)]);
  if (media === 'image') return fields.images !== undefined ? listed(fields.images) : listed(fields.image);
  if (media === 'video') return fields.video !== undefined ? listed(fields.video) : listed(fields.videos);
  return fields.audio !== undefined ? listed(fields.audio) : listed(fields.audio_file);
}

async function download(url: unknown, index: number, context: AdapterContext, secrets: readonly string[]): Promise<Buffer> {
  if (typeof url !== 'string' || url === '') throw bad(`Output ${index + 1} of the fal result has no URL.`);
  let bytes: Buffer;
  if (url.startsWith('data:')) {
    const match = /^data:[^,;]*(?:;[^,;]*)*;base64,([A-Za-z0-9+/]*={0,2})$/.exec(url);
    if (!match) throw bad(`Output ${index + 1} of the fal result is a data URL that is not base64.`);
    if ((match[1]!.length / 4) * 3 > context.maxOutputBytes + 2) throw tooLarge(index, context);
    bytes = Buffer.from(match[1]!, 'base64');
  } else {
    try {
      bytes = await context.fetchOutput(url);
    } catch (error) {
      throw new ProviderFailure(
        PROVIDER_ERROR_CODES.outputFetch,
        `Output ${index + 1} could not be fetched from ${hostOf(url)}: ${upstreamMessage((error as Error).message ?? String(error), secrets)}`,
      );
    }
  }
  if (bytes.length > context.maxOutputBytes) throw tooLarge(index, context);
  return bytes;
}

function typed(bytes: Buffer, media: MediaKind, index: number): OutputFile {
  const contentType = sniffContentType(bytes);
  if (!contentType?.startsWith(`${media}/`)) {
    throw bad(`Output ${index + 1} of the fal result is not ${media === 'image' ? 'an' : 'a'} ${media} file (${contentType ?? 'unrecognised bytes'}).`);
  }
  const file: OutputFile = { bytes, contentType, mediaType: media };
  if (media === 'image') Object.assign(file, imageDimensions(bytes) ?? {});
  return file;
}

function hostOf(url: string): string {
  try {
    return new URL(url).host || 'the URL';
  } catch {
    return 'an invalid URL';
  }
}

const bad = (message: string) => new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, message);
const tooLarge = (index: number, context: AdapterContext) =>
  new ProviderFailure(PROVIDER_ERROR_CODES.outputFetch, `Output ${index + 1} is larger than the ${context.maxOutputBytes} bytes allowed.`);
