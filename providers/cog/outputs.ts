import type { Mode } from '../../domain/catalog/models.ts';
import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage } from '../adapter.ts';
import type { OutputFile } from '../provider.ts';
import { imageDimensions, sniffContentType } from '../local/sniff.ts';

/**
 * A succeeded prediction's `output` as our result. Cog returns files as `data:<mime>;base64,...` URLs, or as
 * http(s) URLs when the container runs with --upload-url (crates/coglet-python/src/output.rs); a model's
 * text is a string, or a list of strings when its run() yields (joined, as the tokens of a stream).
 * Outputs may nest in lists and objects (a model may return a BaseModel); every string is looked at.
 */
export interface OutputLimits {
  maxOutputBytes: number;
  fetchOutput(url: string): Promise<Buffer>;
}

export async function collectOutputs(output: unknown, mode: Mode, limits: OutputLimits): Promise<{ textOutput?: string; files: OutputFile[] }> {
  if (mode === 'text_to_text') {
    if (typeof output === 'string') return { textOutput: output, files: [] };
    if (Array.isArray(output) && output.every((part) => typeof part === 'string')) return { textOutput: output.join(''), files: [] };
    throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The model's output is not text (${describe(output)}).`);
  }
  const strings: string[] = [];
  collectStrings(output, strings, 0);
  const files: OutputFile[] = [];
  const texts: string[] = [];
  for (const value of strings) {
    if (value.startsWith('data:')) files.push(asFile(decodeDataUrl(value, limits.maxOutputBytes)));
    else if (/^https?:\/\//i.test(value)) files.push(asFile(await fetched(value, limits)));
    else texts.push(value);
  }
  const wanted = mediaOf(mode);
  const kept = files.filter((file) => file.mediaType === wanted);
  if (kept.length === 0) {
    throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The model's output holds no ${wanted} file (${describe(output)}).`);
  }
  return { ...(texts.length > 0 ? { textOutput: texts.join('\n') } : {}), files: kept };
}

function mediaOf(mode: Mode): OutputFile['mediaType'] {
  if (mode === 'text_to_audio') return 'audio';
  if (mode === 'text_to_video' || mode === 'image_to_video' || mode === 'video_to_video') return 'video';
  return 'image';
}

function collectStrings(value: unknown, into: string[], depth: number): void {
  if (depth > 8) return;
  if (typeof value === 'string') into.push(value);
  else if (Array.isArray(value)) for (const item of value) collectStrings(item, into, depth + 1);
  else if (typeof value === 'object' && value !== null) for (const item of Object.values(value)) collectStrings(item, into, depth + 1);
}

/** A base64 data URL's bytes, refused before decoding when its length says it is over the limit. */
export function decodeDataUrl(url: string, maxBytes: number): Buffer {
  const comma = url.indexOf(',');
  const header = comma < 0 ? '' : url.slice(5, comma);
  if (comma < 0 || !/;base64$/i.test(header)) throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, 'An output data URL is not base64.');
  const encoded = url.slice(comma + 1);
  if (Math.floor((encoded.length * 3) / 4) - 2 > maxBytes) {
    throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `An output file is larger than ${maxBytes} bytes.`);
  }
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, 'An output data URL is not valid base64.');
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length > maxBytes) throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `An output file is larger than ${maxBytes} bytes.`);
  return bytes;
}

async function fetched(url: string, limits: OutputLimits): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await limits.fetchOutput(url);
  } catch (error) {
    throw new ProviderFailure(
      PROVIDER_ERROR_CODES.outputFetch,
      `An output file could not be fetched: ${upstreamMessage((error as Error).message ?? String(error))}`,
    );
  }
  if (bytes.length > limits.maxOutputBytes) {
    throw new ProviderFailure(PROVIDER_ERROR_CODES.outputFetch, `An output file is larger than ${limits.maxOutputBytes} bytes.`);
  }
  return bytes;
}

/** The file as its bytes say it is (the data URL's mime type comes from a file name's extension, so it is not trusted). */
function asFile(bytes: Buffer): OutputFile {
  const contentType = sniffContentType(bytes);
  if (!contentType) throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, 'An output file is not an image, audio or video file this service knows.');
  const mediaType = contentType.split('/')[0] as OutputFile['mediaType'];
  const file: OutputFile = { bytes, contentType, mediaType };
  if (mediaType === 'image') Object.assign(file, imageDimensions(bytes) ?? {});
  return file;
}

function describe(output: unknown): string {
  if (output === undefined) return 'none';
  if (Array.isArray(output)) return `a list of ${output.length}`;
  if (typeof output === 'string') return output.startsWith('data:') ? 'a data URL' : 'a string';
  return typeof output;
}
