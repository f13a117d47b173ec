/**
 * The local provider's output makers, one entry for the seven modes.
 *
 *   makeOutputs(mode, params, inputs, options?) → Promise<{ text?, usage?, finishReason?, files }>
 *
 * - mode: text_to_text | text_to_image | text_to_video | text_to_audio | image_to_image |
 *   image_to_video | video_to_video.
 * - params: the generation's validated params (prompt, seed, aspectRatio, numImages, …).
 * - inputs: the source files' bytes: `images` for image_to_image / image_to_video, `videos` for
 *   video_to_video (the adapter fetches assets and URLs; this library does no I/O but ffmpeg).
 * - options: operator settings (sizes, caps, ffmpeg path and time-out); see LocalOutputOptions.
 *
 * text_to_text returns `text` (plus token counts in `usage`, and finishReason 'length' when cut
 * at maxTokens) and no files; every other mode returns files, each with its bytes, contentType,
 * mediaType and, as they apply, width, height and durationSeconds:
 *   images → image/png (numImages of them); audio → audio/mpeg | audio/wav | audio/ogg;
 *   video → video/mp4 (H.264, or MPEG-4 part 2 without libx264).
 * Bad params or inputs, and ffmpeg failures, reject with LocalOutputError (see errors.ts for
 * the codes); nothing is retried here. Per module: text.ts, image.ts, audio.ts, video.ts.
 *
 * `sniffContentType(bytes)` names a file's type from its magic bytes (for checking uploads).
 */
import { makeAudio } from './audio.ts';
import { LocalOutputError } from './errors.ts';
import { makeImages } from './image.ts';
import type { LocalOutputOptions, Params } from './params.ts';
import { makeText } from './text.ts';
import type { OutputFile } from '../provider.ts';
import { makeVideo } from './video.ts';

export { LocalOutputError, type LocalOutputErrorCode } from './errors.ts';
export { LOCAL_ASPECT_RATIOS, sizeForAspectRatio, type AspectRatio, type LocalOutputOptions } from './params.ts';
export { LOCAL_AUDIO_FORMATS, LOCAL_VOICES } from './audio.ts';
export { imageDimensions, sniffContentType } from './sniff.ts';

export const LOCAL_MODES = ['text_to_text', 'text_to_image', 'text_to_video', 'text_to_audio', 'image_to_image', 'image_to_video', 'video_to_video'] as const;
export type LocalMode = (typeof LOCAL_MODES)[number];

/** The provider interface's output file: the local provider makes exactly what every provider reports. */
export type { OutputFile } from '../provider.ts';

export interface Outputs {
  text?: string;
  /** text_to_text: whitespace tokens in the prompt(s) and in the answer. */
  usage?: { promptTokens: number; completionTokens: number };
  /** text_to_text: 'length' when the answer was cut at maxTokens. */
  finishReason?: 'stop' | 'length';
  files: OutputFile[];
}

export interface OutputInputs {
  images?: Buffer[];
  videos?: Buffer[];
}

export async function makeOutputs(mode: LocalMode, params: Params, inputs: OutputInputs = {}, options?: LocalOutputOptions): Promise<Outputs> {
  if (params === null || typeof params !== 'object' || Array.isArray(params)) throw new LocalOutputError('invalid_params', 'params must be an object');
  switch (mode) {
    case 'text_to_text': {
      const out = makeText(params, options);
      return {
        text: out.text,
        usage: { promptTokens: out.promptTokens, completionTokens: out.tokens },
        finishReason: out.truncated ? 'length' : 'stop',
        files: [],
      };
    }
    case 'text_to_image':
    case 'image_to_image':
      return { files: await makeImages(mode, params, inputs.images, options) };
    case 'text_to_audio':
      return { files: [await makeAudio(params, options)] };
    case 'text_to_video':
    case 'image_to_video':
    case 'video_to_video':
      return { files: [await makeVideo(mode, params, inputs, options)] };
    default:
      throw new LocalOutputError('invalid_params', `unknown mode ${String(mode)}`, 'mode');
  }
}
