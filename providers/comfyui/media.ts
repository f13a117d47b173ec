import type { Mode } from '../../domain/catalog/models.ts';
import { imageDimensions, sniffContentType } from '../local/sniff.ts';
import type { OutputFile } from '../provider.ts';

/**
 * An output file typed from its bytes (never from its name or ComfyUI's word), and whether it fits the
 * job's mode: image modes take images; video modes take video containers and animated GIF/WEBP
 * (SaveAnimatedWEBP, VHS_VideoCombine's gif and webp formats); text_to_audio takes audio, FLAC included
 * (SaveAudio's format).
 */
export type MediaType = OutputFile['mediaType'];

export function mediaTypeOf(mode: Mode): MediaType | undefined {
  if (mode === 'text_to_image' || mode === 'image_to_image') return 'image';
  if (mode === 'text_to_video' || mode === 'image_to_video' || mode === 'video_to_video') return 'video';
  if (mode === 'text_to_audio') return 'audio';
  return undefined;
}

export function contentTypeOf(bytes: Buffer): string | undefined {
  if (bytes.length >= 4 && bytes.toString('latin1', 0, 4) === 'fLaC') return 'audio/flac';
  return sniffContentType(bytes);
}

/** The file as an output of `mediaType`, or undefined when its bytes are not of that kind. */
export function typedOutput(bytes: Buffer, mediaType: MediaType): OutputFile | undefined {
  const contentType = contentTypeOf(bytes);
  if (!contentType) return undefined;
  const fits =
    mediaType === 'image'
      ? contentType.startsWith('image/')
      : mediaType === 'video'
        ? contentType.startsWith('video/') || contentType === 'image/gif' || contentType === 'image/webp'
        : contentType.startsWith('audio/');
  if (!fits) return undefined;
  const file: OutputFile = { bytes, contentType, mediaType };
  if (contentType.startsWith('image/')) {
    const size = imageDimensions(bytes);
    if (size) {
      file.width = size.width;
      file.height = size.height;
    }
  }
  return file;
}

/** Upload names: the generation's id and the file's place, with the extension LoadImage's checks expect. */
export function uploadName(generationId: string, slot: string, contentType: string): string {
  const extension: Record<string, string> = {
    'image/png': 'png',
    'image/jpeg': 'jpg',
    'image/webp': 'webp',
    'image/gif': 'gif',
    'video/mp4': 'mp4',
    'video/webm': 'webm',
    'video/quicktime': 'mov',
  };
  const safe = generationId.replace(/[^A-Za-z0-9_-]/g, '_');
  return `${safe}-${slot}.${extension[contentType] ?? 'bin'}`;
}
