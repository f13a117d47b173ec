import {
  PROVIDER_ERROR_CODES,
  ProviderFailure,
  upstreamMessage,
  type AdapterContext,
  type AdapterJob,
  type InboundEvent,
  type ProviderAdapter,
  type VerifiedEvent,
} from '../adapter.ts';
import { type CallContext, clockOf, type Followed, followedAdapter, type Look, type ProtocolModule } from '../follower.ts';
import { requestUpstream, retryingRateLimits, statusFailure, type UpstreamResponse } from '../upstream-http.ts';
import type { CogDeploymentTarget } from './deployment.ts';
import { cogInput } from './inputs.ts';
import { collectOutputs } from './outputs.ts';
import { cogErrorText, isTerminal, readPrediction, type CogPrediction } from './prediction.ts';
import type { CogSettings } from './settings.ts';
import { jobToken, verifyCogEvent, webhookUrl } from './webhook.ts';

/**
 * A self-hosted Cog container (docs/providers/cog.md): a protocol module on the job follower
 * (providers/follower.ts), which owns the looks, events, deadline, cancels and the submission window.
 *
 * A job is one prediction whose id is our generation id, created by `PUT /predictions/{id}` with
 * `Prefer: respond-async`; Cog then posts its state to the job's webhook, and retries the end for about seven
 * minutes (settings.ts). Cog has no way to read a prediction (no GET): a PUT of an id it runs answers with
 * that run's state, but a PUT of an id that ended runs it again. So a job is followed by its webhooks
 * (`parseEvent`), and its look (`get`) is a probe, the same PUT without a webhook, which the follower makes
 * only when this module says (`nextLookMs`, from the job's notes): when no end can still be on its way, after
 * Cog's whole retry window of silence, or, for a job resumed after a restart, after the longest gap between
 * Cog's tries. A probe that found no run started one: it is cancelled at once, and the job fails unless the
 * first run's end arrives within one more gap.
 */
const MAX_BUSY_WAIT_MS = 30_000;

/** What the follower keeps of a prediction for this module. */
export interface CogNotes {
  /** A probe's body: the job's input, no webhook. */
  probeBody: string;
  /** When Cog is next asked (a probe), unless something is heard of the job first. */
  probeAt: number;
  /** Set once Cog was found without a run of the job: it fails then, unless its end arrives first. */
  giveUpAt?: number;
  /** The job was told running (a start webhook, or a `processing` answer). */
  running: boolean;
  /** Since when Cog could not be asked (said on the timeline once, and once when it answers again). */
  unreachedSince?: number;
}

export function createCogAdapter(settings: CogSettings, deployment: { id: string; target: CogDeploymentTarget }, context: AdapterContext): ProviderAdapter {
  return followedAdapter(cogProtocol(settings, deployment, context), context);
}

export function cogProtocol(settings: CogSettings, deployment: { id: string; target: CogDeploymentTarget }, context: AdapterContext): ProtocolModule<CogNotes> {
  const base = (deployment.target.baseUrl ?? settings.baseUrl).replace(/\/+$/, '');
  // The follower's clock: the times in the notes are read against its timers.
  const clock = clockOf(context);
  // Without an events URL nothing can say a run ended: Cog is asked every poll (docs: such a service runs jobs twice).
  const quietMs = context.eventsUrl ? settings.webhookRetryWindowMs : context.pollIntervalMs;
  const gapMs = context.eventsUrl ? settings.webhookRetryGapMs : 0;
  type Job = Followed<CogNotes>;

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

  /** The notes of a job followed from now, first probed `firstProbeInMs` from now unless heard of before. */
  function notesFor(job: AdapterJob, id: string, firstProbeInMs: number): CogNotes {
    // A probe's body has no webhook, so a run it starts by mistake (and cancels) posts nothing that could pass for the job's end.
    const probeBody = JSON.stringify({ input: cogInput({ ...job, generationId: id }, deployment.target) });
    return { probeBody, probeAt: clock.now() + firstProbeInMs, running: false };
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

  const over = (failure: ProviderFailure): Look => ({ type: 'over', update: { type: 'failed', errorCode: failure.code, errorMessage: failure.message } });
  const cancelledBeforeTaken = () => new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The job was cancelled before Cog took it.');

  /** PUTs until Cog takes the prediction: 409 (slots busy) and 503 (setup not finished) wait, 429 honours Retry-After. */
  async function putUntilTaken(job: AdapterJob, body: string, on: CallContext): Promise<CogPrediction> {
    const id = job.generationId;
    let wait = settings.busyRetryMs;
    for (;;) {
      if (on.signal.aborted) throw cancelledBeforeTaken();
      let response: UpstreamResponse;
      try {
        response = await retryingRateLimits(
          () => put(id, body, on.signal),
          job.deadline,
          () => clock.now(),
          (ms) => on.say(`Rate limited in front of Cog (429); trying again in ${ms} ms.`),
          settings.busyRetryMs,
          on.signal,
          { ...rateLimitOptions, sleep: on.wait },
        );
      } catch (error) {
        if (on.signal.aborted) throw cancelledBeforeTaken();
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
      if (clock.now() + wait >= job.deadline) {
        const code = response.status === 409 ? PROVIDER_ERROR_CODES.rateLimited : PROVIDER_ERROR_CODES.unavailable;
        throw new ProviderFailure(code, `Cog answered ${response.status} until the job's deadline: ${said}`);
      }
      on.say(`Cog answered ${response.status} (${said}); trying again in ${wait} ms.`);
      await on.wait(wait);
      wait = Math.min(wait * 2, MAX_BUSY_WAIT_MS);
    }
  }

  /**
   * What a prediction (an event, or a PUT's answer) says of the job. Anything heard of it starts the silence
   * again: Cog is next asked a whole retry window from now.
   */
  function lookOf(f: Pick<Job, 'providerJobId' | 'job' | 'notes'>, prediction: CogPrediction, via: 'event' | 'answer', progress: string[] = []): Look {
    f.notes.probeAt = clock.now() + quietMs;
    if (!isTerminal(prediction.status)) {
      // A 202's `starting` only says Cog took it; the start webhook (or `processing`) says it runs.
      const running = prediction.status === 'processing' || via === 'event';
      if (running) f.notes.running = true;
      return { type: 'pending', running, progress };
    }
    if (prediction.status === 'failed') {
      return over(
        new ProviderFailure(
          PROVIDER_ERROR_CODES.error,
          `The model failed: ${upstreamMessage(prediction.error ?? 'Cog gave no error message.', secretsOf(f.providerJobId))}`,
        ),
      );
    }
    if (prediction.status === 'canceled') return over(new ProviderFailure(PROVIDER_ERROR_CODES.cancelled, 'The prediction was canceled at Cog.'));
    return { type: 'ending', progress, settle: () => outputsOf(f, prediction) };
  }

  async function outputsOf(f: Pick<Job, 'providerJobId' | 'job'>, prediction: CogPrediction): Promise<Look> {
    try {
      const result = await collectOutputs(prediction.output, f.job.mode, { maxOutputBytes: context.maxOutputBytes, fetchOutput: context.fetchOutput });
      return { type: 'over', update: { type: 'succeeded', ...result } };
    } catch (error) {
      const failure = error instanceof ProviderFailure ? error : new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, String(error));
      return over(new ProviderFailure(failure.code, upstreamMessage(failure.message, secretsOf(f.providerJobId))));
    }
  }

  /** Cog has no run of the job: its end is waited for one more gap (an end on its way), then the job fails. */
  function noRun(f: Job, why: string, progress: string[]): Look {
    if (f.notes.giveUpAt === undefined) {
      f.notes.giveUpAt = clock.now() + gapMs;
      progress.push(`Cog has no run of this prediction (${why}); its end is waited for until ${new Date(f.notes.giveUpAt).toISOString()}.`);
    }
    return { type: 'pending', progress };
  }

  /** Said on the timeline once while Cog cannot be asked; it is asked again a poll interval from now. */
  function unreached(f: Job, what: string): Look {
    f.notes.probeAt = clock.now() + context.pollIntervalMs;
    if (f.notes.unreachedSince !== undefined) return { type: 'pending' };
    f.notes.unreachedSince = clock.now();
    return { type: 'pending', progress: [`Cog cannot be reached since ${new Date(f.notes.unreachedSince).toISOString()}: ${what}`] };
  }

  /** …and once when it can again. */
  function reached(f: Job): string[] {
    if (f.notes.unreachedSince === undefined) return [];
    f.notes.unreachedSince = undefined;
    return ['Cog is reached again.'];
  }

  /**
   * Asks Cog about a job nothing was heard of for a while: a PUT of the same id and input, no webhook. A run in
   * flight answers with its state and nothing starts. No run (it ended and its end is lost, or the container
   * restarted): Cog starts one, which is cancelled at once; the first run's end may still arrive within a gap.
   * The PUT is not stopped when the job ends meanwhile (`on.signal`): its answer is read, so that a run it
   * started is cancelled whatever happened to the job.
   */
  async function probe(f: Job, on: CallContext): Promise<Look> {
    const id = f.providerJobId;
    let response: UpstreamResponse;
    try {
      response = await put(id, f.notes.probeBody);
    } catch (error) {
      return unreached(f, upstreamMessage((error as Error).message, secretsOf(id)));
    }
    if (response.status === 202 || response.status === 200) {
      const prediction = readPrediction(response.json);
      if (!prediction) {
        f.notes.probeAt = clock.now() + context.pollIntervalMs;
        return { type: 'pending', progress: [failureOf(id, response).message] };
      }
      if (!isTerminal(prediction.status) && (startedAfresh(response.json) || (f.notes.running && prediction.status === 'starting'))) {
        // Whether or not the end came meanwhile, this run is a second one: stopped before it does anything.
        void cancelQuietly(id);
        if (on.signal.aborted) return { type: 'pending' };
        return noRun(f, 'a check of it started a new run, which was cancelled at once', reached(f));
      }
      return lookOf(f, prediction, 'answer', reached(f));
    }
    // Cog answers a run it has before looking at its slots: 409 says it has none of this id (and started none).
    if (response.status === 409) return noRun(f, 'Cog answered 409 to a check of it', reached(f));
    if (response.status === 503 || response.status === 429 || response.status >= 500) {
      return unreached(f, `Cog answered ${response.status}: ${upstreamMessage(cogErrorText(response.json, response.text), secretsOf(id))}`);
    }
    return over(failureOf(id, response));
  }

  return {
    kind: 'cog',
    maxConcurrentJobs: settings.maxConcurrentJobs,

    adoption: {
      // Handed over again after a restart, its PUT may have reached Cog: an event of that run adopts it, and nothing is PUT.
      windowMs: gapMs,
      // An end retried by Cog may reach a restarted service before the job is resumed: kept for as long as Cog retries.
      keepMs: settings.webhookRetryWindowMs,
      byProviderJobId: true,
      keeps: (providerJobId, payload) => {
        const prediction = readPrediction(payload);
        return prediction !== undefined && (prediction.id === undefined || prediction.id === providerJobId);
      },
      // A terminal state is never replaced by an earlier one.
      replaces: (held, incoming) => !isTerminal(readPrediction(held)!.status) || isTerminal(readPrediction(incoming)!.status),
      waiting: (ms) => `Waiting up to ${Math.round(ms / 1000)} s for an event of a run Cog may have started before the restart.`,
    },

    async submit(job, on) {
      const id = job.generationId;
      const answer = await putUntilTaken(job, bodyFor(job), on);
      const notes = notesFor(job, id, quietMs);
      // A 202 for an id Cog already runs (a submit repeated after a crash) carries that run's state.
      return { providerJobId: id, notes, first: lookOf({ providerJobId: id, job, notes }, answer, 'answer') };
    },

    // No PUT now: a run that ended while no process followed it has its end retried by Cog, which comes within a
    // gap. A job adopted by an event of its run was just heard of: a whole window of silence first.
    resume: (providerJobId, job, adopted) => ({ notes: notesFor(job, providerJobId, adopted ? quietMs : gapMs) }),

    nextLookMs: (f) => (f.notes.giveUpAt ?? f.notes.probeAt) - clock.now(),

    async get(f, on) {
      const now = clock.now();
      if (f.notes.giveUpAt !== undefined) {
        if (now < f.notes.giveUpAt) return { type: 'pending' };
        return over(
          new ProviderFailure(
            PROVIDER_ERROR_CODES.error,
            'Cog no longer had this prediction and its end never reached this service (the container restarted, or its webhooks could not reach the events URL for as long as Cog retries them).',
          ),
        );
      }
      // Not yet silent long enough: an end may still be on its way, and a PUT now could run the job again.
      if (now < f.notes.probeAt) return { type: 'pending' };
      return probe(f, on);
    },

    // A cancel is not cut short by the service stopping: a run left going would hold a slot, and may be paid.
    cancel: (providerJobId) => cancelQuietly(providerJobId),

    overdue: () => ({
      type: 'failed',
      errorCode: PROVIDER_ERROR_CODES.timeout,
      errorMessage: "The prediction did not end by the job's deadline; it was cancelled at Cog.",
    }),

    verifyEvent(event: InboundEvent): VerifiedEvent {
      return verifyCogEvent(event, settings.webhookSecret, settings.webhookAuthToken);
    },

    parseEvent(f, payload) {
      const prediction = readPrediction(payload);
      if (!prediction || (prediction.id !== undefined && prediction.id !== f.providerJobId)) return { type: 'pending' };
      return lookOf(f, prediction, 'event');
    },
  };
}

/**
 * Coglet answers a PUT that starts a run with `{id, status: "starting"}` alone, and one that joins a run in
 * flight with its whole state, which always holds `logs` (routes.rs); the earlier Python server answers both
 * with the whole state, so only a `starting` after `processing` tells it there.
 */
function startedAfresh(body: unknown): boolean {
  return typeof body === 'object' && body !== null && !('logs' in body);
}
