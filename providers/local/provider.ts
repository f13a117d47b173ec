import { randomUUID } from 'node:crypto';
import type { Clock, Timer } from '../../runtime/clock.ts';
import type { Provider, ProviderJob, ProviderUpdate } from '../provider.ts';
import { LocalOutputError, makeOutputs, type LocalOutputOptions } from './outputs.ts';

export interface LocalProviderOptions {
  /** Time from submission to the result; half of it is spent before reporting `running`. */
  latencyMs: number;
  /** Share of jobs, 0 to 1, that fail with `provider_error` (to exercise failure paths). */
  failureRate: number;
  clock: Clock;
  outputs?: LocalOutputOptions;
  random?: () => number;
  /** Jobs at once across all workspaces (LOCAL_PROVIDER_MAX_CONCURRENT_JOBS); undefined for no limit. */
  maxConcurrentJobs?: number;
}

/** The embedded provider: no network, real small outputs for every mode, configurable latency and failures. */
export function localProvider(options: LocalProviderOptions): Provider {
  const jobs = new Map<string, { timers: Timer[]; cancelled: boolean }>();
  const random = options.random ?? Math.random;
  // Zero latency still answers on a later turn of the event loop, never inside submit.
  const later = (fn: () => void, ms: number): Timer => {
    if (ms > 0) return options.clock.setTimer(fn, ms);
    const handle = setImmediate(fn);
    return { cancel: () => clearImmediate(handle) };
  };

  return {
    name: 'local',
    maxConcurrentJobs: options.maxConcurrentJobs,
    // Its jobs live in this process: a restart hands them over again, whatever was written of them.
    answersWithinRequest: true,
    async submit(job: ProviderJob, report: (update: ProviderUpdate) => void) {
      const providerJobId = `local_${randomUUID()}`;
      const state = { timers: [] as Timer[], cancelled: false };
      jobs.set(providerJobId, state);
      const half = Math.floor(options.latencyMs / 2);
      state.timers.push(
        later(() => {
          if (state.cancelled) return;
          report({ type: 'running' });
          state.timers.push(
            later(() => {
              if (state.cancelled) return;
              void run(job).then((update) => {
                jobs.delete(providerJobId);
                if (state.cancelled) return;
                // A text answer streams as providers stream theirs: its words as pieces, then its end.
                if (update.type === 'succeeded' && update.textOutput) for (const delta of piecesOf(update.textOutput)) report({ type: 'output', delta });
                report(update);
              });
            }, options.latencyMs - half),
          );
        }, half),
      );
      return { providerJobId };
    },
    cancel(providerJobId: string) {
      const state = jobs.get(providerJobId);
      if (!state) return;
      state.cancelled = true;
      for (const timer of state.timers) timer.cancel();
      jobs.delete(providerJobId);
    },
  };

  async function run(job: ProviderJob): Promise<ProviderUpdate> {
    if (options.failureRate > 0 && random() < options.failureRate) {
      return { type: 'failed', errorCode: 'provider_error', errorMessage: 'The local provider failed this job (simulated failure).' };
    }
    try {
      const out = await makeOutputs(job.mode, job.params, job.inputs, options.outputs);
      const usage = out.usage && { inputTokens: out.usage.promptTokens, outputTokens: out.usage.completionTokens };
      return { type: 'succeeded', textOutput: out.text, files: out.files, ...(usage ? { usage } : {}) };
    } catch (error) {
      if (error instanceof LocalOutputError) {
        return {
          type: 'failed',
          errorCode: error.code === 'invalid_input' ? 'invalid_input' : error.code === 'invalid_params' ? 'invalid_params' : 'provider_error',
          errorMessage: error.message,
        };
      }
      return { type: 'failed', errorCode: 'provider_error', errorMessage: (error as Error).message };
    }
  }
}

/** A text in the pieces the local provider streams: each word with the space after it. */
export function piecesOf(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}
