import { ApiError } from '../../errors.ts';
import type { Mode } from '../../../domain/catalog/models.ts';
import { assetMediaTypes } from '../../../persistence/stores/files.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';

export interface GenerationInputsIn {
  imageAssetIds?: string[];
  videoAssetIds?: string[];
  imageUrls?: string[];
  videoUrls?: string[];
}

const TAKES: Record<Mode, { media: 'image' | 'video' | null; max: number }> = {
  text_to_text: { media: null, max: 0 },
  text_to_image: { media: null, max: 0 },
  text_to_video: { media: null, max: 0 },
  text_to_audio: { media: null, max: 0 },
  image_to_image: { media: 'image', max: 4 },
  image_to_video: { media: 'image', max: 1 },
  video_to_video: { media: 'video', max: 1 },
};

/**
 * Checks a generation's inputs against its mode (docs/generations.md): text modes take none; image modes
 * take imageAssetIds/imageUrls; video_to_video takes videoAssetIds/videoUrls; data URLs must declare the
 * matching mime type; asset ids must be assets of the same workspace, of the right media type.
 */
export async function checkInputs(unit: () => Unit, workspaceId: string, mode: Mode, inputs: GenerationInputsIn): Promise<GenerationInputsIn> {
  const takes = TAKES[mode];
  const images = [...(inputs.imageAssetIds ?? []), ...(inputs.imageUrls ?? [])];
  const videos = [...(inputs.videoAssetIds ?? []), ...(inputs.videoUrls ?? [])];
  if (takes.media === null) {
    if (images.length + videos.length > 0) throw new ApiError('validation_error', `inputs: ${mode} takes no input files`);
    return {};
  }
  const given = takes.media === 'image' ? images : videos;
  const wrong = takes.media === 'image' ? videos : images;
  const idsField = takes.media === 'image' ? 'imageAssetIds' : 'videoAssetIds';
  const urlsField = takes.media === 'image' ? 'imageUrls' : 'videoUrls';
  if (wrong.length > 0)
    throw new ApiError(
      'validation_error',
      `inputs: ${mode} takes ${takes.media} inputs (${idsField} or ${urlsField}), not ${takes.media === 'image' ? 'video' : 'image'} ones`,
    );
  if (given.length === 0) throw new ApiError('validation_error', `inputs.${idsField}: ${mode} needs an input ${takes.media} (${idsField} or ${urlsField})`);
  if (given.length > takes.max)
    throw new ApiError('validation_error', `inputs: ${mode} takes at most ${takes.max} input ${takes.media}${takes.max > 1 ? 's' : ''}`);

  for (const [i, url] of (inputs[urlsField] ?? []).entries()) checkUrl(url, takes.media, `inputs.${urlsField}[${i}]`);
  const ids = inputs[idsField] ?? [];
  if (ids.length > 0) {
    const rows = await assetMediaTypes(unit(), workspaceId, ids);
    for (const [i, id] of ids.entries()) {
      const row = rows.find((r) => r.id === id);
      // Another workspace's asset answers exactly like a missing one.
      if (!row) throw new ApiError('validation_error', `inputs.${idsField}[${i}]: no asset ${id} in this workspace`);
      if (row.media_type !== takes.media)
        throw new ApiError('validation_error', `inputs.${idsField}[${i}]: asset ${id} is a ${row.media_type}, not a ${takes.media}`);
    }
  }
  return { [idsField]: ids.length ? ids : undefined, [urlsField]: inputs[urlsField]?.length ? inputs[urlsField] : undefined };
}

function checkUrl(url: string, media: 'image' | 'video', field: string): void {
  if (url.startsWith('data:')) {
    const match = /^data:([a-z]+)\/[a-z0-9.+-]+(?:;[a-z0-9-]+=[^;,]*)*;base64,([A-Za-z0-9+/]*={0,2})$/i.exec(url);
    if (!match) throw new ApiError('validation_error', `${field}: a data URL must look like data:${media}/<type>;base64,<data>`);
    if (match[1]!.toLowerCase() !== media)
      throw new ApiError('validation_error', `${field}: a data URL here must declare an ${media} type (data:${media}/...), not ${match[1]}/...`);
    if (match[2]!.length === 0) throw new ApiError('validation_error', `${field}: the data URL is empty`);
    return;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ApiError('validation_error', `${field}: not a valid URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ApiError('validation_error', `${field}: only http(s) and data URLs are accepted`);
  if (parsed.username || parsed.password) throw new ApiError('validation_error', `${field}: URLs with credentials are not accepted`);
}
