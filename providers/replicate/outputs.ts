import type { Mode } from '../../domain/catalog/models.ts';
import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage, type TokenUsage } from '../adapter.ts';
import type { OutputFile } from '../provider.ts';
import { imageDimensions, sniffContentType } from '../local/sniff.ts';

/**
 * A succeeded prediction's `output` as our result. A language model's output is its streamed tokens (an
 * array of strings, joined) or one string; any other model's output is a URL, an array of URLs or an
 * object holding them, each copied at once through `fetchOutput` (Replicate deletes outputs after an
 * hour) and typed by its bytes. Failures throw ProviderFailure.
 */
export const MAX_OUTPUT_FILES = 16;

export interface OutputLimits {
  fetchOutput(url: string): Promise<Buffer>;
  maxOutputBytes: number;
  secrets: readonly string[];
}

export interface Result {
  textOutput?: string;
  files: OutputFile[];
  usage?: TokenUsage;
}

export async function collectOutputs(mode: Mode, output: unknown, limits: OutputLimits): Promise<Result> {
  if (mode === 'text_to_text') return { textOutput: textOf(output), files: [] };
  const urls = urlsIn(output);
  if (urls.length === 0)
    throw new ProviderFailure(
      PROVIDER_ERROR_CODES.badResponse,
      `The prediction succeeded without an output file: ${upstreamMessage(JSON.stringify(output) ?? 'null', limits.secrets)}`,
    );
  if (urls.length > MAX_OUTPUT_FILES)
    throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `The prediction has ${urls.length} output files; at most ${MAX_OUTPUT_FILES} are taken.`);
  const files: OutputFile[] = [];
  for (const url of urls) files.push(typed(await download(url, limits)));
  return { files };
}

function textOf(output: unknown): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output) && output.every((token) => typeof token === 'string')) return output.join('');
  throw new ProviderFailure(
    PROVIDER_ERROR_CODES.badResponse,
    'The prediction of a language model has no text output (neither a string nor an array of strings).',
  );
}

/** Every http(s) or data URL in the output, in order: a string, an array, or an object's values. */
function urlsIn(output: unknown, depth = 0): string[] {
  if (typeof output === 'string') return /^(https?:|data:)/i.test(output) ? [output] : [];
  if (depth > 3 || output === null || typeof output !== 'object') return [];
  const values = Array.isArray(output) ? output : Object.values(output);
  return values.flatMap((value) => urlsIn(value, depth + 1));
}

async function download(url: string, limits: OutputLimits): Promise<Buffer> {
  let bytes: Buffer;
  if (url.startsWith('data:')) {
    bytes = dataUrlBytes(url, limits.maxOutputBytes);
  } else {
    try {
      bytes = await limits.fetchOutput(url);
    } catch (error) {
      throw new ProviderFailure(
        PROVIDER_ERROR_CODES.outputFetch,
        `An output file could not be fetched: ${upstreamMessage((error as Error).message ?? String(error), limits.secrets)}`,
      );
    }
  }
  if (bytes.length > limits.maxOutputBytes) {
    throw new ProviderFailure(PROVIDER_ERROR_CODES.outputFetch, `An output file is larger than ${limits.maxOutputBytes} bytes.`);
  }
  return bytes;
}

// Sync mode (Prefer: wait) may answer outputs as data URLs; they are decoded here, bounded like a download.
function dataUrlBytes(url: string, maxBytes: number): Buffer {
  const comma = url.indexOf(',');
  if (comma < 0 || !/;base64$/i.test(url.slice(0, comma))) throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, 'An output data URL is not base64.');
  if ((url.length - comma - 1) * 0.75 > maxBytes + 3)
    throw new ProviderFailure(PROVIDER_ERROR_CODES.outputFetch, `An output file is larger than ${maxBytes} bytes.`);
  return Buffer.from(url.slice(comma + 1), 'base64');
}

function typed(bytes: Buffer): OutputFile {
  const contentType = sniffContentType(bytes);
  if (!contentType) throw new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, 'An output file is not an image, audio or video file we recognise.');
  const mediaType = contentType.split('/')[0] as OutputFile['mediaType'];
  if (mediaType !== 'image') return { bytes, contentType, mediaType };
  const size = imageDimensions(bytes);
  return { bytes, contentType, mediaType, ...(size ?? {}) };
}
