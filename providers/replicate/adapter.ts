import {
  PROVIDER_ERROR_CODES,
  ProviderFailure,
  upstreamMessage,
  type AdapterContext,
  type InboundEvent,
  type ProviderAdapter,
  type VerifiedEvent,
} from '../adapter.ts';
import { type CallContext, type Followed, followedAdapter, type Look, type ProtocolModule, type Submitted } from '../follower.ts';
import { requestUpstream, retryingRateLimits, statusFailure, type UpstreamResponse } from '../upstream-http.ts';
import { createRoute, type ReplicateDeploymentTarget } from './deployment.ts';
import { predictionInput } from './inputs.ts';
import { collectOutputs } from './outputs.ts';
import { endFailure, isTerminal, logTail, problemDetail, readPrediction, tokenUsage, type Prediction } from './prediction.ts';
import { eventJobOf, eventJobUrl } from '../event-job.ts';
import { REPLICATE_RESUBMIT_GRACE_MS, type ReplicateSettings } from './settings.ts';
import { verifyStandardWebhook } from './signature.ts';
import { readStream, streamUrlAllowed } from './stream.ts';

/**
 * Runs jobs on Replicate's HTTP API (https://replicate.com/docs/reference/http) through plain undici
 * (providers/upstream-http.ts), not the `replicate` client: the client retries 429s on its own schedule
 * with no regard for our deadline, reads answers without a size bound, and takes no Cancel-After header.
 *
 * A protocol module on the job follower (providers/follower.ts), which owns the polls, events, stream,
 * deadline and cancels. A job is one prediction, created asynchronously (no `Prefer: wait`: we follow it)
 * with our deadline as `Cancel-After`, and followed by its webhooks (`start`, `completed`) when the service
 * has a public URL and a webhook secret, with GET /v1/predictions/{id} as the backstop look whenever no
 * event came for a poll interval. The follower tells at most one terminal update per job.
 *
 * A text_to_text job whose new prediction has `urls.stream` also reads that stream of server-sent events
 * (./stream.ts): each `output` event is an `output` delta as it arrives. The stream only adds deltas: the
 * outcome still comes from the prediction, and a stream that fails or is cut at `maxResponseBytes` just stops
 * them. At the prediction's end the stream gets `drainMs` to deliver its last pieces (it ends with `done`
 * then), so the deltas come before the terminal update. A resumed or adopted job reads no stream.
 */
/** What the follower keeps of a prediction for this module. */
export interface ReplicateNotes {
  lastTail: string;
  /** Consecutive 2xx answers that were not the prediction. */
  badAnswers: number;
  /** Since when Replicate could not be asked about the job (said on the timeline once, and once when it answers again). */
  unreachedSince?: number;
  lastFailure?: ProviderFailure;
}

export function createReplicateAdapter(
  settings: ReplicateSettings,
  deployment: { id: string; target: ReplicateDeploymentTarget },
  context: AdapterContext,
): ProviderAdapter {
  return followedAdapter(replicateProtocol(settings, deployment, context), context);
}

export function replicateProtocol(
  settings: ReplicateSettings,
  deployment: { id: string; target: ReplicateDeploymentTarget },
  context: AdapterContext,
): ProtocolModule<ReplicateNotes> {
  const secrets = [settings.apiToken];
  const route = createRoute(deployment.target);
  // Replicate takes HTTPS webhook URLs only; with a plain-http service URL (development) we poll.
  const sendsWebhooks = context.eventsUrl?.startsWith('https://') === true && settings.webhookSecret !== undefined;
  const resubmitGraceMs = settings.resubmitGraceMs ?? REPLICATE_RESUBMIT_GRACE_MS;
  const TOKEN_LABEL = 'replicate-job-token';
  type Job = Followed<ReplicateNotes>;
  const fresh = (): ReplicateNotes => ({ lastTail: '', badAnswers: 0 });

  function call(method: 'GET' | 'POST', path: string, signal: AbortSignal, body?: unknown, headers: Record<string, string> = {}): Promise<UpstreamResponse> {
    return requestUpstream(`${settings.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${settings.apiToken}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      timeoutMs: context.requestTimeoutMs,
      maxBytes: context.maxResponseBytes,
      signal,
    });
  }

  /** What a prediction (a poll's answer, an event, the create's answer) says of the job. */
  function lookOf(f: Pick<Job, 'job' | 'notes'>, prediction: Prediction, before: string[] = []): Look {
    const progress = [...before];
    const tail = logTail(prediction.logs, secrets);
    if (tail !== '' && tail !== f.notes.lastTail) {
      f.notes.lastTail = tail;
      progress.push(tail);
    }
    const running = prediction.status === 'processing';
    if (!isTerminal(prediction.status)) return { type: 'pending', running, progress };
    return { type: 'ending', running, progress, settle: () => outcomeOf(f, prediction) };
  }

  async function outcomeOf(f: Pick<Job, 'job'>, prediction: Prediction): Promise<Look> {
    if (prediction.status !== 'succeeded') {
      const failure = endFailure(prediction, context.now() >= f.job.deadline, secrets);
      return { type: 'over', update: { type: 'failed', errorCode: failure.code, errorMessage: failure.message } };
    }
    try {
      const result = await collectOutputs(f.job.mode, prediction.output, { fetchOutput: context.fetchOutput, maxOutputBytes: context.maxOutputBytes, secrets });
      const usage = tokenUsage(prediction.metrics);
      return {
        type: 'over',
        update: {
          type: 'succeeded',
          files: result.files,
          ...(result.textOutput === undefined ? {} : { textOutput: result.textOutput }),
          ...(usage ? { usage } : {}),
        },
      };
    } catch (error) {
      const failure = error instanceof ProviderFailure ? error : new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, upstreamMessage(String(error), secrets));
      return { type: 'over', update: { type: 'failed', errorCode: failure.code, errorMessage: failure.message } };
    }
  }

  const over = (failure: ProviderFailure): Look => ({ type: 'over', update: { type: 'failed', errorCode: failure.code, errorMessage: failure.message } });

  /** Following goes on (the prediction may still finish, and be paid): the timeline says why nothing moves. */
  function unreached(f: Job, failure: ProviderFailure): Look {
    f.notes.lastFailure = failure;
    if (f.notes.unreachedSince !== undefined) return { type: 'pending' };
    f.notes.unreachedSince = context.now();
    return {
      type: 'pending',
      progress: [`Replicate cannot be reached since ${new Date(f.notes.unreachedSince).toISOString()}: ${upstreamMessage(failure.message, secrets)}`],
    };
  }

  function streamOf(url: string): NonNullable<Submitted<ReplicateNotes>['stream']> {
    return (onDelta, signal) =>
      readStream({
        url,
        // As the streaming guide's curl example sends it (Replicate's JavaScript client sends none).
        headers: { authorization: `Bearer ${settings.apiToken}` },
        timeoutMs: context.requestTimeoutMs,
        maxBytes: context.maxResponseBytes,
        signal,
        onOutput: onDelta,
      }).then(() => undefined);
  }

  return {
    kind: 'replicate',
    maxConcurrentJobs: settings.maxConcurrentJobs,
    // Cancel-After ends the prediction at the deadline, and its canceled/aborted state needs a poll or an event to reach us.
    deadlineGraceMs: 3 * context.pollIntervalMs + context.requestTimeoutMs,
    drainMs: Math.min(context.requestTimeoutMs, 2_000),

    adoption: {
      windowMs: sendsWebhooks ? resubmitGraceMs : 0,
      keeps: (providerJobId, payload) => readPrediction(payload)?.id === providerJobId,
      // A later event replaces the one kept, unless that one was the end and this is not.
      replaces: (held, incoming) => !isTerminal(readPrediction(held)!.status) || isTerminal(readPrediction(incoming)!.status),
      waiting: (ms) => `Waiting up to ${Math.round(ms / 1000)} s for an event of a prediction Replicate may have made before the restart.`,
    },

    async submit(job, on: CallContext) {
      const body = {
        ...route.body,
        input: predictionInput(job, deployment.target),
        ...(sendsWebhooks
          ? { webhook: eventJobUrl(context.eventsUrl!, TOKEN_LABEL, settings.webhookSecret!, job.generationId), webhook_events_filter: ['start', 'completed'] }
          : {}),
      };
      const response = await retryingRateLimits(
        () => {
          const remainingMs = job.deadline - context.now();
          if (remainingMs <= 0) throw new ProviderFailure(PROVIDER_ERROR_CODES.timeout, 'The job passed its deadline before Replicate accepted it.');
          // Whole seconds, rounded up, in the duration form Replicate's examples use (`Cancel-After: 1m`).
          return call('POST', route.path, on.signal, body, { 'cancel-after': `${Math.max(1, Math.ceil(remainingMs / 1000))}s` });
        },
        job.deadline,
        context.now,
        (waitMs) => on.say(`Replicate is rate limiting (429); trying again in ${Math.ceil(waitMs / 1000)} s.`),
        1_000,
        on.signal,
        { ...(context.rateLimitAttempts !== undefined ? { maxAttempts: context.rateLimitAttempts } : {}), sleep: on.wait },
      );
      if (response.status < 200 || response.status > 299) throw statusFailure(response, problemDetail(response.json, response.text), secrets);
      const prediction = readPrediction(response.json);
      if (!prediction) {
        throw new ProviderFailure(
          PROVIDER_ERROR_CODES.badResponse,
          `Replicate's answer to the create is not a prediction: ${upstreamMessage(response.text.slice(0, 200), secrets)}`,
        );
      }
      const notes = fresh();
      // Only a job submitted here reads the stream: after a restart the pieces already sent are gone.
      const streams =
        job.mode === 'text_to_text' &&
        prediction.streamUrl !== undefined &&
        !isTerminal(prediction.status) &&
        streamUrlAllowed(prediction.streamUrl, settings.baseUrl);
      return {
        providerJobId: prediction.id,
        notes,
        first: lookOf({ job, notes }, prediction),
        ...(streams ? { stream: streamOf(prediction.streamUrl!) } : {}),
      };
    },

    resume: () => ({ notes: fresh() }),

    async get(f, on) {
      try {
        const response = await call('GET', `/predictions/${encodeURIComponent(f.providerJobId)}`, on.signal);
        if (response.status >= 200 && response.status < 300) {
          const prediction = readPrediction(response.json);
          if (prediction && prediction.id === f.providerJobId) {
            f.notes.badAnswers = 0;
            f.notes.lastFailure = undefined;
            const reached = f.notes.unreachedSince !== undefined ? ['Replicate is reached again.'] : [];
            f.notes.unreachedSince = undefined;
            return lookOf(f, prediction, reached);
          }
          f.notes.badAnswers += 1;
          f.notes.lastFailure = new ProviderFailure(
            PROVIDER_ERROR_CODES.badResponse,
            `Replicate's answer for prediction ${f.providerJobId} is not that prediction: ${upstreamMessage(response.text.slice(0, 200), secrets)}`,
          );
          return f.notes.badAnswers >= 3 ? over(f.notes.lastFailure) : { type: 'pending' };
        }
        if (response.status === 404) {
          return over(
            new ProviderFailure(
              PROVIDER_ERROR_CODES.error,
              `Replicate knows no prediction ${f.providerJobId}: ${upstreamMessage(problemDetail(response.json, response.text), secrets)}`,
            ),
          );
        }
        if (response.status === 401 || response.status === 403) return over(statusFailure(response, problemDetail(response.json, response.text), secrets));
        // 429 and 5xx pass: the next look asks again, until the deadline.
        return unreached(f, statusFailure(response, problemDetail(response.json, response.text), secrets));
      } catch (error) {
        if (on.signal.aborted) return { type: 'pending' };
        return unreached(
          f,
          error instanceof ProviderFailure ? error : new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, upstreamMessage(String(error), secrets)),
        );
      }
    },

    async cancel(providerJobId, _notes, signal) {
      try {
        await call('POST', `/predictions/${encodeURIComponent(providerJobId)}/cancel`, signal);
      } catch {
        // Whatever Replicate answers (already finished, unknown, unreachable), a cancel does not throw.
      }
    },

    overdue: (f) => {
      const failure =
        f.notes.lastFailure ?? new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The prediction ${f.providerJobId} did not finish by the job's deadline.`);
      return { type: 'failed', errorCode: failure.code, errorMessage: failure.message };
    },

    verifyEvent(event: InboundEvent): VerifiedEvent {
      if (!settings.webhookSecret) return { ok: false, message: 'REPLICATE_WEBHOOK_SECRET is not set; Replicate events are not accepted.' };
      const verdict = verifyStandardWebhook(settings.webhookSecret, event.headers, event.body, event.now);
      if (!verdict.ok) return verdict;
      let payload: unknown;
      try {
        payload = JSON.parse(event.body.toString('utf8'));
      } catch {
        return { ok: false, message: 'The event body is not JSON.' };
      }
      const prediction = readPrediction(payload);
      if (!prediction) return { ok: false, message: 'The event body is not a prediction.' };
      const jobId = eventJobOf(event.query, TOKEN_LABEL, settings.webhookSecret);
      if (jobId === 'wrong') return { ok: false, message: "The event URL's job token is wrong." };
      return { ok: true, providerJobId: prediction.id, eventId: verdict.id, payload, ...(jobId ? { jobId } : {}) };
    },

    parseEvent(f, payload) {
      const prediction = readPrediction(payload);
      if (!prediction || prediction.id !== f.providerJobId) return { type: 'pending' };
      return lookOf(f, prediction);
    },
  };
}
