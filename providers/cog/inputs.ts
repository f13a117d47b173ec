import type { AdapterJob, InputFile } from '../adapter.ts';
import type { CogDeploymentTarget } from './deployment.ts';

/** The prediction's `input`: the catalog's mapped input, with our input files as `data:` URLs (Cog reads them for File and Path inputs). */
export function cogInput(job: AdapterJob, target: CogDeploymentTarget): Record<string, unknown> {
  const input: Record<string, unknown> = { ...job.input };
  const images = job.inputs.images.map(dataUrl);
  if (images.length > 0) input[target.imageInput ?? 'image'] = target.imageInputIsList ? images : images[0];
  const video = job.inputs.videos[0];
  if (video) input[target.videoInput ?? 'video'] = dataUrl(video);
  if (job.inputs.mask) input[target.maskInput ?? 'mask'] = dataUrl(job.inputs.mask);
  return input;
}

function dataUrl(file: InputFile): string {
  return `data:${file.contentType};base64,${file.bytes.toString('base64')}`;
}
