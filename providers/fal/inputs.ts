import { PROVIDER_ERROR_CODES, ProviderFailure, type AdapterJob, type InputFile } from '../adapter.ts';
import type { FalDeploymentTarget } from './deployment.ts';

/**
 * The JSON a fal app is submitted: the catalog's mapped input, with our input files added as data URLs
 * (fal's apps take a URL or a data URI wherever they take a file), so nothing is uploaded to fal's storage.
 */
export function falInput(job: AdapterJob, files: FalDeploymentTarget['files'] = {}): Record<string, unknown> {
  const input: Record<string, unknown> = { ...job.input };
  const { images, videos, mask } = job.inputs;
  if (images.length > 0) {
    if (files.images) input[files.images] = images.map(dataUrl);
    else if (images.length === 1) input[files.image ?? 'image_url'] = dataUrl(images[0]!);
    else throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `This fal deployment takes one input image, not ${images.length}.`);
  }
  if (videos.length > 1) throw new ProviderFailure(PROVIDER_ERROR_CODES.inputRejected, `This fal deployment takes one input video, not ${videos.length}.`);
  if (videos.length === 1) input[files.video ?? 'video_url'] = dataUrl(videos[0]!);
  if (mask) input[files.mask ?? 'mask_url'] = dataUrl(mask);
  return input;
}

function dataUrl(file: InputFile): string {
  return `data:${file.contentType};base64,${file.bytes.toString('base64')}`;
}
