import type { AdapterJob, InputFile, ProviderAdapter } from './adapter.ts';
import type { Provider, ProviderJob } from './provider.ts';
import { sniffContentType } from './local/sniff.ts';

/** A real provider's adapter as the generation actor uses providers: one deployment's adapter under its kind's name. */
export function adapterProvider(kind: string, adapter: ProviderAdapter, defaultDeadlineMs: number, now: () => number): Provider {
  const jobOf = (job: ProviderJob): AdapterJob => ({
    generationId: job.generationId,
    mode: job.mode,
    modelId: job.modelId,
    params: job.params,
    input: job.input ?? { ...job.params },
    inputs: { images: job.inputs.images.map((b) => fileOf(b, 'image/png')), videos: job.inputs.videos.map((b) => fileOf(b, 'video/mp4')) },
    deadline: job.deadline ?? now() + defaultDeadlineMs,
    ...(job.afterRestart ? { afterRestart: true } : {}),
  });
  return {
    name: kind,
    maxConcurrentJobs: adapter.maxConcurrentJobs,
    ...(adapter.answersWithinRequest ? { answersWithinRequest: true } : {}),
    submit: (job, report) => adapter.submit(jobOf(job), report),
    resume: (providerJobId, job, report) => adapter.resume(providerJobId, jobOf(job), report),
    // Whatever the provider answers (already finished, unknown), a cancel ends nothing here with an error.
    cancel: (providerJobId) => void adapter.cancel(providerJobId).catch(() => undefined),
    ...(adapter.verifyEvent ? { verifyEvent: adapter.verifyEvent.bind(adapter) } : {}),
    ...(adapter.deliverEvent ? { deliverEvent: adapter.deliverEvent.bind(adapter) } : {}),
  };
}

/** An input file with the type its bytes say (the resolver checked them already). */
function fileOf(bytes: Buffer, fallback: string): InputFile {
  return { bytes, contentType: sniffContentType(bytes) ?? fallback };
}
