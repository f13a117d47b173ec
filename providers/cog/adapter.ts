import { PROVIDER_ERROR_CODES, ProviderFailure, upstreamMessage, type AdapterContext, type AdapterJob, type ProviderAdapter, type Report } from '../adapter.ts';
import { requestUpstream, retryingRateLimits, statusFailure, type UpstreamResponse } from '../upstream-http.ts';
import type { CogDeploymentTarget } from './deployment.ts';
import { cogInput } from './inputs.ts';
import { collectOutputs } from './outputs.ts';
import { cogErrorText, isTerminal, readPrediction, type CogPrediction } from './prediction.ts';
import type { CogSettings } from './settings.ts';
import { jobToken, verifyCogEvent, webhookUrl } from './webhook.ts';

/**
 * A self-hosted Cog container (docs/providers/cog.md). A job is one prediction whose id is our generation id,
 * created by `PUT /predictions/{id}` with `Prefer: respond-async`; Cog then posts its state to the job's
 * webhook. Cog has no way to read a prediction's state (no GET), but a PUT of an id it is running answers
 * 202 with that prediction's current state and starts nothing: that is both how a job is resumed and the
 * backstop when no event arrives for a poll interval. Cog forgets a prediction once it ends, so a PUT of an
 * id that already ended runs it again; the adapter re-PUTs only while it has no terminal state, and cancels
 * a second run that such a re-PUT may have started once the first run's end arrives.
 */
export function createCogAdapter(settings: CogSettings, deployment: { id: string; target: CogDeploymentTarget }, context: AdapterContext): ProviderAdapter {
  const base = (deployment.target.baseUrl ?? settings.baseUrl).replace(/\/+$/, '');
  const follows = new Map<string, Follow>();
  const waiting = new Map<string, AbortController>();
  const MAX_BUSY_WAIT_MS = 30_000;
  /** Runs a backstop PUT may start again for one job (see rePut). */
  const MAX_RESTARTS = 1;

  const secretsOf = (id: string) => [settings.webhookSecret, settings.webhookAuthToken ?? '', jobToken(settings.webhookSecret, id)];
  const predictionUrl = (id: string) => `${base}/predictions/${encodeURIComponent(id)}`;

  function bodyFor(job: AdapterJob): string {
    const body: Record<string, unknown> = { input: cogInput(job, deployment.target) };
    if (context.eventsUrl) {
      body.webhook = webhookUrl(context.eventsUrl, settings.webhookSecret, job.generationId);
      // Output and logs events repeat the whole state (every data URL so far) at most every 500 ms: not wanted.
      body.webhook_events_filter = ['start', 'completed'];
    }
    return JSON.stringify(body);
  }

  function put(id: string, body: string, signal?: AbortSignal): Promise<UpstreamResponse> {
    return requestUpstream(predictionUrl(id), {
      method: 'PUT',
      headers: { 'content-type': 'application/json', prefer: 'respond-async' },
      body,
      timeoutMs: context.requestTimeoutMs,
      maxBytes: context.maxResponseBytes,
      ...(signal ? { signal } : {}),
    });
  }

  async function cancelQuietly(id: string): Promise<void> {
    try {
      // 200 when Cog runs it, 404 when it does not (ended, or never arrived): either is fine.
      await requestUpstream(`${predictionUrl(id)}/cancel`, { method: 'POST', timeoutMs: context.requestTimeoutMs, maxBytes: 64 * 1024 });
    } catch {
      // Unreachable: the job is over for us either way.
    }
  }

  function failureOf(id: string, response: UpstreamResponse): ProviderFailure {
    const said = cogErrorText(response.json, response.text);
    if (response.status === 404 || response.status === 405) {
      return new ProviderFailure(
        PROVIDER_ERROR_CODES.error,
        `The server at the Cog base URL answered ${response.status} to PUT /predictions/{id}; is it a Cog container? ${upstreamMessage(said, secretsOf(id))}`,
      );
    }
    if (response.status >= 200 && response.status < 300) {
      return new ProviderFailure(
        PROVIDER_ERROR_CODES.badResponse,
        `Cog answered ${response.status} with something that is not a prediction: ${upstreamMessage(response.text.slice(0, 200), secretsOf(id))}`,
      );
    }
    return statusFailure(response, said, secretsOf(id));
  }

  /** PUTs until Cog takes the prediction: 409 (slots busy) and 503 (setup not finished) wait, 429 honours Retry-After. */
  async function putUntilTaken(job: AdapterJob, body: string, report: Report, signal: AbortSignal): Promise<CogPrediction> {
    const id = job.generationId;
    let wait = settings.busyRetryMs;
    for (;;) {
      if (signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The job was cancelled before Cog took it.');
      let response: UpstreamResponse;
      try {
        response = await retryingRateLimits(
          () => put(id, body, signal),
          job.deadline,
          context.now,
          (ms) => report({ type: 'progress', detail: `Rate limited in front of Cog (429); trying again in ${ms} ms.` }),
          settings.busyRetryMs,
          signal,
        );
      } catch (error) {
        if (signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The job was cancelled before Cog took it.');
        // A PUT that timed out may still have started the run: stop it rather than leave a slot taken.
        if (error instanceof ProviderFailure && error.code === PROVIDER_ERROR_CODES.timeout) void cancelQuietly(id);
        throw error instanceof ProviderFailure ? error : new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, upstreamMessage(String(error)));
      }
      if (response.status === 202 || response.status === 200) {
        const prediction = readPrediction(response.json);
        if (!prediction) throw failureOf(id, response);
        return prediction;
      }
      if (response.status !== 409 && response.status !== 503) throw failureOf(id, response);
      const said = upstreamMessage(cogErrorText(response.json, response.text), secretsOf(id));
      if (context.now() + wait >= job.deadline) {
        const code = response.status === 409 ? PROVIDER_ERROR_CODES.rateLimited : PROVIDER_ERROR_CODES.unavailable;
        throw new ProviderFailure(code, `Cog answered ${response.status} until the job's deadline: ${said}`);
      }
      report({ type: 'progress', detail: `Cog answered ${response.status} (${said}); trying again in ${wait} ms.` });
      await sleep(wait, signal);
      wait = Math.min(wait * 2, MAX_BUSY_WAIT_MS);
    }
  }

  function follow(id: string, job: AdapterJob, report: Report, body: string): Follow {
    follows.get(id)?.stop();
    const state = new Follow(id, job, report, body, context.now());
    follows.set(id, state);
    const tick = () => {
      if (state.done) return;
      if (context.now() >= job.deadline) {
        finish(state);
        void cancelQuietly(id);
        report({
          type: 'failed',
          errorCode: PROVIDER_ERROR_CODES.timeout,
          errorMessage: "The prediction did not end by the job's deadline; it was cancelled at Cog.",
        });
        return;
      }
      if (!state.asking && context.now() - state.lastHeard >= context.pollIntervalMs) void rePut(state);
      state.timer = setTimeout(tick, Math.max(1, Math.min(context.pollIntervalMs, job.deadline - context.now())));
    };
    state.timer = setTimeout(tick, Math.max(1, Math.min(context.pollIntervalMs, job.deadline - context.now())));
    return state;
  }

  function finish(state: Follow): void {
    state.stop();
    if (follows.get(state.id) === state) follows.delete(state.id);
  }

  /** The backstop and the resume: a PUT of the same id and body, which Cog answers with the state of the run it has. */
  async function rePut(state: Follow): Promise<void> {
    state.asking = true;
    try {
      const response = await put(state.id, state.body);
      if (state.done) return;
      state.lastHeard = context.now();
      if (response.status === 202 || response.status === 200) {
        const prediction = readPrediction(response.json);
        if (!prediction) {
          state.report({ type: 'progress', detail: failureOf(state.id, response).message });
          return;
        }
        if (!isTerminal(prediction.status)) {
          if (startedAfresh(response.json) || (state.running && prediction.status === 'starting')) {
            // The run this job had is gone (it ended and its end never arrived, or the container restarted): Cog just
            // started another under the same id. Once is a lost webhook; twice means the webhooks do not get here.
            state.restarts++;
            if (state.restarts > MAX_RESTARTS) {
              finish(state);
              void cancelQuietly(state.id);
              state.report({
                type: 'failed',
                errorCode: PROVIDER_ERROR_CODES.error,
                errorMessage:
                  'Cog ended this prediction again without its end reaching this service (are its webhooks able to reach the events URL?); it was cancelled.',
              });
              return;
            }
            state.report({
              type: 'progress',
              detail:
                'Cog had no run of this prediction (it ended without its end reaching this service, or the container restarted): it runs again under the same id.',
            });
          }
          state.rePut = true;
        }
        absorb(state, prediction, 'answer');
      } else if (response.status === 409 || response.status === 503 || response.status === 429 || response.status >= 500) {
        // 409 here: Cog does not run this id and every slot is busy; the next backstop asks again.
        state.report({
          type: 'progress',
          detail: `Cog answered ${response.status}: ${upstreamMessage(cogErrorText(response.json, response.text), secretsOf(state.id))}`,
        });
      } else {
        const failure = failureOf(state.id, response);
        finish(state);
        state.report({ type: 'failed', errorCode: failure.code, errorMessage: failure.message });
      }
    } catch (error) {
      if (!state.done) state.report({ type: 'progress', detail: `Cog could not be asked: ${(error as Error).message}` });
    } finally {
      state.asking = false;
    }
  }

  function absorb(state: Follow, prediction: CogPrediction, via: 'event' | 'answer'): void {
    if (state.done) return;
    state.lastHeard = context.now();
    if (!isTerminal(prediction.status)) {
      // A 202's `starting` only says Cog took it; the start webhook (or `processing`) says it runs.
      if (!state.running && (prediction.status === 'processing' || via === 'event')) {
        state.running = true;
        state.report({ type: 'running' });
      }
      return;
    }
    finish(state);
    // A re-PUT that found no run started one under the same id: this end is the first run's, so stop the second.
    if (via === 'event' && state.rePut) void cancelQuietly(state.id);
    const { report } = state;
    if (prediction.status === 'failed') {
      report({
        type: 'failed',
        errorCode: PROVIDER_ERROR_CODES.error,
        errorMessage: `The model failed: ${upstreamMessage(prediction.error ?? 'Cog gave no error message.', secretsOf(state.id))}`,
      });
      return;
    }
    if (prediction.status === 'canceled') {
      report({ type: 'failed', errorCode: PROVIDER_ERROR_CODES.cancelled, errorMessage: 'The prediction was canceled at Cog.' });
      return;
    }
    collectOutputs(prediction.output, state.job.mode, { maxOutputBytes: context.maxOutputBytes, fetchOutput: context.fetchOutput }).then(
      (result) => report({ type: 'succeeded', ...result }),
      (error: unknown) => {
        const failure = error instanceof ProviderFailure ? error : new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, String(error));
        report({ type: 'failed', errorCode: failure.code, errorMessage: upstreamMessage(failure.message, secretsOf(state.id)) });
      },
    );
  }

  return {
    kind: 'cog',
    maxConcurrentJobs: settings.maxConcurrentJobs,

    async submit(job, report) {
      const id = job.generationId;
      const body = bodyFor(job);
      const controller = new AbortController();
      waiting.set(id, controller);
      try {
        const answer = await putUntilTaken(job, body, report, controller.signal);
        const state = follow(id, job, report, body);
        // A 202 for an id Cog already runs (a submit repeated after a crash) carries that run's state; it is
        // told after submit has answered, so the caller holds the provider job id first.
        setImmediate(() => absorb(state, answer, 'answer'));
        return { providerJobId: id };
      } finally {
        if (waiting.get(id) === controller) waiting.delete(id);
      }
    },

    resume(providerJobId, job, report) {
      const state = follow(providerJobId, job, report, bodyFor({ ...job, generationId: providerJobId }));
      void rePut(state);
    },

    async cancel(providerJobId) {
      waiting.get(providerJobId)?.abort();
      const state = follows.get(providerJobId);
      // Following stops first: a backstop PUT after the cancel would start the prediction again.
      if (state) finish(state);
      await cancelQuietly(providerJobId);
    },

    verifyEvent(event) {
      return verifyCogEvent(event, settings.webhookSecret, settings.webhookAuthToken);
    },

    deliverEvent(providerJobId, payload) {
      const state = follows.get(providerJobId);
      const prediction = readPrediction(payload);
      if (!state || !prediction || (prediction.id !== undefined && prediction.id !== providerJobId)) return;
      absorb(state, prediction, 'event');
    },

    async close() {
      for (const state of follows.values()) state.stop();
      follows.clear();
      for (const controller of waiting.values()) controller.abort();
      waiting.clear();
    },
  };
}

/** One followed prediction. */
class Follow {
  done = false;
  running = false;
  /** A re-PUT is in flight (one at a time). */
  asking = false;
  /** A re-PUT was answered with a run in progress, which may be a second run if the first had ended. */
  rePut = false;
  /** Runs Cog started again because a re-PUT found none. */
  restarts = 0;
  timer: NodeJS.Timeout | undefined;

  constructor(
    readonly id: string,
    readonly job: AdapterJob,
    readonly report: Report,
    readonly body: string,
    public lastHeard: number,
  ) {}

  stop(): void {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/**
 * Coglet answers a PUT that starts a run with `{id, status: "starting"}` alone, and one that joins a run in
 * flight with its whole state, which always holds `logs` (routes.rs); the earlier Python server answers both
 * with the whole state, so only a `starting` after `processing` tells it there.
 */
function startedAfresh(body: unknown): boolean {
  return typeof body === 'object' && body !== null && !('logs' in body);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
