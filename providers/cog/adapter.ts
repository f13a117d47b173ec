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
 * webhook, and retries the end for about seven minutes (settings.ts). Cog has no way to read a prediction:
 * a PUT of an id it runs answers with that run's state, but a PUT of an id that ended runs it again. So a job
 * is followed by its webhooks alone, and Cog is asked (a probe: the same PUT without a webhook) only when no
 * end can still be on its way: after Cog's whole retry window of silence, or, for a job resumed after a
 * restart, after the longest gap between Cog's tries. A probe that found no run started one: it is cancelled
 * at once, and the job fails unless the first run's end arrives within one more gap.
 */
export function createCogAdapter(settings: CogSettings, deployment: { id: string; target: CogDeploymentTarget }, context: AdapterContext): ProviderAdapter {
  const base = (deployment.target.baseUrl ?? settings.baseUrl).replace(/\/+$/, '');
  const follows = new Map<string, Follow>();
  const waiting = new Map<string, AbortController>();
  /** Events about ids nothing follows yet (an end retried by Cog that reaches a restarted service before its resume). */
  const early = new Map<string, { prediction: CogPrediction; at: number }>();
  const wakers = new Map<string, () => void>();
  const MAX_BUSY_WAIT_MS = 30_000;
  const MAX_EARLY = 1_000;
  // Without an events URL nothing can say a run ended: Cog is asked every poll (docs: such a service runs jobs twice).
  const quietMs = context.eventsUrl ? settings.webhookRetryWindowMs : context.pollIntervalMs;
  const gapMs = context.eventsUrl ? settings.webhookRetryGapMs : 0;

  const rateLimitOptions = context.rateLimitAttempts !== undefined ? { maxAttempts: context.rateLimitAttempts } : {};
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

  /** A probe's body: no webhook, so a run it starts by mistake (and cancels) posts nothing that could pass for the job's end. */
  function probeBodyFor(job: AdapterJob): string {
    return JSON.stringify({ input: cogInput(job, deployment.target) });
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
          rateLimitOptions,
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

  /** Follows `id` by its webhooks; the first probe comes after `firstProbeInMs` of silence. */
  function follow(id: string, job: AdapterJob, report: Report, firstProbeInMs: number): Follow {
    follows.get(id)?.stop();
    const state = new Follow(id, job, report, probeBodyFor({ ...job, generationId: id }), context.now() + firstProbeInMs);
    follows.set(id, state);
    const tick = () => {
      if (state.done) return;
      const now = context.now();
      if (now >= job.deadline) {
        finish(state);
        void cancelQuietly(id);
        report({
          type: 'failed',
          errorCode: PROVIDER_ERROR_CODES.timeout,
          errorMessage: "The prediction did not end by the job's deadline; it was cancelled at Cog.",
        });
        return;
      }
      if (state.giveUpAt !== undefined && now >= state.giveUpAt) {
        finish(state);
        report({
          type: 'failed',
          errorCode: PROVIDER_ERROR_CODES.error,
          errorMessage:
            'Cog no longer had this prediction and its end never reached this service (the container restarted, or its webhooks could not reach the events URL for as long as Cog retries them).',
        });
        return;
      }
      if (!state.probing && state.giveUpAt === undefined && now >= state.probeAt) void probe(state);
      state.timer = setTimeout(tick, Math.max(1, Math.min(context.pollIntervalMs, job.deadline - now)));
    };
    state.timer = setTimeout(tick, Math.max(1, Math.min(context.pollIntervalMs, job.deadline - context.now())));
    return state;
  }

  /** Tells a follow what came for its id before it existed, after the caller holds the provider job id. */
  function catchUp(state: Follow): void {
    const held = early.get(state.id);
    if (!held) return;
    early.delete(state.id);
    absorb(state, held.prediction, 'event');
  }

  function finish(state: Follow): void {
    state.stop();
    if (follows.get(state.id) === state) follows.delete(state.id);
  }

  /**
   * Asks Cog about a job nothing was heard of for a while: a PUT of the same id and input, no webhook. A run in
   * flight answers with its state and nothing starts. No run (it ended and its end is lost, or the container
   * restarted): Cog starts one, which is cancelled at once; the first run's end may still arrive within a gap.
   */
  async function probe(state: Follow): Promise<void> {
    state.probing = true;
    try {
      const response = await put(state.id, state.probeBody);
      if (response.status === 202 || response.status === 200) {
        const prediction = readPrediction(response.json);
        if (!prediction) {
          if (!state.done) state.report({ type: 'progress', detail: failureOf(state.id, response).message });
          state.probeAt = context.now() + context.pollIntervalMs;
          return;
        }
        if (!isTerminal(prediction.status) && (startedAfresh(response.json) || (state.running && prediction.status === 'starting'))) {
          // Whether or not the end came meanwhile, this run is a second one: stopped before it does anything.
          void cancelQuietly(state.id);
          if (state.done) return;
          noRun(state, 'a check of it started a new run, which was cancelled at once');
          return;
        }
        if (state.done) return;
        reached(state);
        absorb(state, prediction, 'answer');
      } else if (response.status === 409) {
        // Cog answers a run it has before looking at its slots: 409 says it has none of this id (and started none).
        if (state.done) return;
        reached(state);
        noRun(state, 'Cog answered 409 to a check of it');
      } else if (response.status === 503 || response.status === 429 || response.status >= 500) {
        if (state.done) return;
        state.probeAt = context.now() + context.pollIntervalMs;
        unreached(state, `Cog answered ${response.status}: ${upstreamMessage(cogErrorText(response.json, response.text), secretsOf(state.id))}`);
      } else {
        if (state.done) return;
        const failure = failureOf(state.id, response);
        finish(state);
        state.report({ type: 'failed', errorCode: failure.code, errorMessage: failure.message });
      }
    } catch (error) {
      if (state.done) return;
      state.probeAt = context.now() + context.pollIntervalMs;
      unreached(state, upstreamMessage((error as Error).message, secretsOf(state.id)));
    } finally {
      state.probing = false;
    }
  }

  /** Cog has no run of the job: its end is waited for one more gap (an end on its way), then the job fails. */
  function noRun(state: Follow, why: string): void {
    if (state.giveUpAt !== undefined) return;
    state.giveUpAt = context.now() + gapMs;
    state.report({
      type: 'progress',
      detail: `Cog has no run of this prediction (${why}); its end is waited for until ${new Date(state.giveUpAt).toISOString()}.`,
    });
  }

  /** Said on the timeline once while Cog cannot be asked, and once when it can again. */
  function unreached(state: Follow, what: string): void {
    if (state.unreachedSince !== undefined) return;
    state.unreachedSince = context.now();
    state.report({ type: 'progress', detail: `Cog cannot be reached since ${new Date(state.unreachedSince).toISOString()}: ${what}` });
  }

  function reached(state: Follow): void {
    if (state.unreachedSince === undefined) return;
    state.unreachedSince = undefined;
    state.report({ type: 'progress', detail: 'Cog is reached again.' });
  }

  function absorb(state: Follow, prediction: CogPrediction, via: 'event' | 'answer'): void {
    if (state.done) return;
    state.probeAt = context.now() + quietMs;
    if (!isTerminal(prediction.status)) {
      // A 202's `starting` only says Cog took it; the start webhook (or `processing`) says it runs.
      if (!state.running && (prediction.status === 'processing' || via === 'event')) {
        state.running = true;
        state.report({ type: 'running' });
      }
      return;
    }
    finish(state);
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

  /** Keeps an event about an id nothing follows yet: a terminal state is never replaced by an earlier one. */
  function keepEarly(id: string, prediction: CogPrediction): void {
    const now = context.now();
    const held = early.get(id);
    if (held && isTerminal(held.prediction.status) && !isTerminal(prediction.status)) return;
    early.delete(id);
    early.set(id, { prediction, at: now });
    for (const [key, value] of early) {
      if (early.size <= MAX_EARLY && now - value.at <= settings.webhookRetryWindowMs) break;
      early.delete(key);
    }
    wakers.get(id)?.();
  }

  /** A job handed over again after a restart may already run (or have run) at Cog: its events are waited for one gap. */
  function heardWithin(id: string, ms: number, signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      if (early.has(id)) return resolve(true);
      const done = (heard: boolean) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        wakers.delete(id);
        resolve(heard);
      };
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(early.has(id)), ms);
      signal.addEventListener('abort', onAbort, { once: true });
      wakers.set(id, () => done(true));
    });
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
        if (job.afterRestart && gapMs > 0) {
          // Its PUT may have reached Cog before the restart: an event of that run adopts it, and nothing is PUT.
          report({ type: 'progress', detail: `Waiting up to ${Math.round(gapMs / 1000)} s for an event of a run Cog may have started before the restart.` });
          if (await heardWithin(id, gapMs, controller.signal)) {
            const state = follow(id, job, report, quietMs);
            setImmediate(() => catchUp(state));
            return { providerJobId: id };
          }
        }
        const answer = await putUntilTaken(job, body, report, controller.signal);
        const state = follow(id, job, report, quietMs);
        // A 202 for an id Cog already runs (a submit repeated after a crash) carries that run's state; it is
        // told after submit has answered, so the caller holds the provider job id first.
        setImmediate(() => {
          absorb(state, answer, 'answer');
          catchUp(state);
        });
        return { providerJobId: id };
      } finally {
        if (waiting.get(id) === controller) waiting.delete(id);
      }
    },

    resume(providerJobId, job, report) {
      // No PUT now: a run that ended while no process followed it has its end retried by Cog, which comes within a gap.
      const state = follow(providerJobId, job, report, gapMs);
      catchUp(state);
    },

    async cancel(providerJobId) {
      waiting.get(providerJobId)?.abort();
      early.delete(providerJobId);
      const state = follows.get(providerJobId);
      // Following stops first: a probe after the cancel would start the prediction again.
      if (state) finish(state);
      await cancelQuietly(providerJobId);
    },

    verifyEvent(event) {
      return verifyCogEvent(event, settings.webhookSecret, settings.webhookAuthToken);
    },

    deliverEvent(providerJobId, payload) {
      const prediction = readPrediction(payload);
      if (!prediction || (prediction.id !== undefined && prediction.id !== providerJobId)) return;
      const state = follows.get(providerJobId);
      if (!state) return keepEarly(providerJobId, prediction);
      absorb(state, prediction, 'event');
    },

    async close() {
      for (const state of follows.values()) state.stop();
      follows.clear();
      for (const controller of waiting.values()) controller.abort();
      waiting.clear();
      early.clear();
    },
  };
}

/** One followed prediction. */
class Follow {
  done = false;
  running = false;
  /** A probe is in flight (one at a time). */
  probing = false;
  /** Set once Cog was found without a run of the job: it fails then unless its end arrives first. */
  giveUpAt: number | undefined;
  /** Since when Cog could not be asked (said on the timeline once). */
  unreachedSince: number | undefined;
  timer: NodeJS.Timeout | undefined;

  constructor(
    readonly id: string,
    readonly job: AdapterJob,
    readonly report: Report,
    readonly probeBody: string,
    /** When Cog is next asked, unless something is heard first. */
    public probeAt: number,
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
