import { PROVIDER_ERROR_CODES, ProviderFailure, type AdapterJob, type InputFile } from '../adapter.ts';
import type { ReplicateDeploymentTarget } from './deployment.ts';

/**
 * The prediction's `input`: the job's mapped input, with our input files set as data URLs in the fields the
 * deployment names. Replicate takes files as HTTP URLs or data URLs; we hold no public URL for a job's
 * inputs, so data URLs it is, up to the 10 MB in all that Replicate's own client inlines
 * (MAX_DATA_URI_SIZE in replicate-javascript's lib/util.js).
 */
export const MAX_INLINE_INPUT_BYTES = 10_000_000;

export function predictionInput(job: AdapterJob, target: ReplicateDeploymentTarget): Record<string, unknown> {
  const input: Record<string, unknown> = { ...job.input };
  const fields = target.files ?? {};
  const { images, videos, mask } = job.inputs;
  const inlined = [...images, ...videos, ...(mask ? [mask] : [])].reduce((sum, file) => sum + file.bytes.length, 0);
  if (inlined > MAX_INLINE_INPUT_BYTES) {
    throw new ProviderFailure(
      PROVIDER_ERROR_CODES.inputRejected,
      `The input files hold ${inlined} bytes; at most ${MAX_INLINE_INPUT_BYTES} are sent inline to Replicate.`,
    );
  }
  if (fields.image && images[0]) input[fields.image] = dataUrl(images[0]);
  if (fields.images && images.length > 0) input[fields.images] = images.map(dataUrl);
  if (fields.video && videos[0]) input[fields.video] = dataUrl(videos[0]);
  if (fields.mask && mask) input[fields.mask] = dataUrl(mask);
  return input;
}

export function dataUrl(file: InputFile): string {
  return `data:${file.contentType};base64,${file.bytes.toString('base64')}`;
}
