import {
  PROVIDER_ERROR_CODES,
  ProviderFailure,
  upstreamMessage,
  type AdapterContext,
  type AdapterJob,
  type InboundEvent,
  type ProviderAdapter,
  type Report,
  type VerifiedEvent,
} from '../adapter.ts';
import { requestUpstream, retryingRateLimits, statusFailure, type UpstreamResponse } from '../upstream-http.ts';
import { createRoute, type ReplicateDeploymentTarget } from './deployment.ts';
import { predictionInput } from './inputs.ts';
import { collectOutputs } from './outputs.ts';
import { endFailure, isTerminal, logTail, problemDetail, readPrediction, tokenUsage, type Prediction } from './prediction.ts';
import type { ReplicateSettings } from './settings.ts';
import { verifyStandardWebhook } from './signature.ts';

/**
 * Runs jobs on Replicate's HTTP API (https://replicate.com/docs/reference/http) through plain undici
 * (providers/upstream-http.ts), not the `replicate` client: the client retries 429s on its own schedule
 * with no regard for our deadline, reads answers without a size bound, and takes no Cancel-After header.
 *
 * A job is one prediction, created asynchronously (no `Prefer: wait`: we follow it) with our deadline as
 * `Cancel-After`, and followed by its webhooks (`start`, `completed`) when the service has a public URL and
 * a webhook secret, with polling GET /v1/predictions/{id} as the backstop whenever no event came for a poll
 * interval. Each followed prediction reports at most one terminal update; anything after it is ignored.
 */
export function createReplicateAdapter(
  settings: ReplicateSettings,
  deployment: { id: string; target: ReplicateDeploymentTarget },
  context: AdapterContext,
): ProviderAdapter {
  const secrets = [settings.apiToken];
  const route = createRoute(deployment.target);
  const closing = new AbortController();
  const follows = new Map<string, Follow>();
  // Replicate takes HTTPS webhook URLs only; with a plain-http service URL (development) we poll.
  const sendsWebhooks = context.eventsUrl?.startsWith('https://') === true && settings.webhookSecret !== undefined;
  // How long past the job's deadline we keep asking: Cancel-After ends the prediction at the deadline,
  // and its canceled/aborted state needs a poll or an event to reach us.
  const graceMs = 3 * context.pollIntervalMs + context.requestTimeoutMs;

  function call(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<UpstreamResponse> {
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
      signal: closing.signal,
    });
  }

  interface Follow {
    id: string;
    job: AdapterJob;
    report: Report;
    running: boolean;
    ended: boolean;
    polling: boolean;
    lastTail: string;
    /** Consecutive 2xx answers that were not a prediction. */
    badAnswers: number;
    lastFailure?: ProviderFailure;
    timer?: NodeJS.Timeout;
  }

  function follow(id: string, job: AdapterJob, report: Report, first?: Prediction): void {
    // A second resume of the same prediction replaces the first follower.
    const previous = follows.get(id);
    if (previous) {
      previous.ended = true;
      clearTimeout(previous.timer);
    }
    const f: Follow = { id, job, report, running: false, ended: false, polling: false, lastTail: '', badAnswers: 0 };
    follows.set(id, f);
    // The first observation waits a turn, so that submit resolves (and the id is made durable) first.
    if (first) setImmediate(() => observe(f, first));
    schedule(f, first ? context.pollIntervalMs : 0);
  }

  function schedule(f: Follow, delayMs: number): void {
    clearTimeout(f.timer);
    if (f.ended || closing.signal.aborted) return;
    f.timer = setTimeout(() => void poll(f), delayMs);
  }

  function tell(f: Follow, update: Parameters<Report>[0]): void {
    if (!closing.signal.aborted) f.report(update);
  }

  function end(f: Follow, failure: ProviderFailure): void {
    if (f.ended) return;
    f.ended = true;
    clearTimeout(f.timer);
    follows.delete(f.id);
    tell(f, { type: 'failed', errorCode: failure.code, errorMessage: failure.message });
  }

  async function poll(f: Follow): Promise<void> {
    if (f.ended || f.polling || closing.signal.aborted) return;
    f.polling = true;
    try {
      const response = await call('GET', `/predictions/${encodeURIComponent(f.id)}`);
      if (response.status >= 200 && response.status < 300) {
        const prediction = readPrediction(response.json);
        if (prediction && prediction.id === f.id) {
          f.badAnswers = 0;
          f.lastFailure = undefined;
          observe(f, prediction);
        } else {
          f.badAnswers += 1;
          f.lastFailure = new ProviderFailure(
            PROVIDER_ERROR_CODES.badResponse,
            `Replicate's answer for prediction ${f.id} is not that prediction: ${upstreamMessage(response.text.slice(0, 200), secrets)}`,
          );
        }
      } else if (response.status === 404) {
        end(
          f,
          new ProviderFailure(
            PROVIDER_ERROR_CODES.error,
            `Replicate knows no prediction ${f.id}: ${upstreamMessage(problemDetail(response.json, response.text), secrets)}`,
          ),
        );
      } else if (response.status === 401 || response.status === 403) {
        end(f, statusFailure(response, problemDetail(response.json, response.text), secrets));
      } else {
        // 429 and 5xx pass: the next poll asks again, until the deadline.
        f.lastFailure = statusFailure(response, problemDetail(response.json, response.text), secrets);
      }
    } catch (error) {
      if (closing.signal.aborted) return;
      f.lastFailure = error instanceof ProviderFailure ? error : new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, upstreamMessage(String(error), secrets));
    } finally {
      f.polling = false;
    }
    if (f.ended) return;
    if (f.badAnswers >= 3 && f.lastFailure) return end(f, f.lastFailure);
    if (context.now() > f.job.deadline + graceMs) {
      void cancelAt(f.id);
      return end(f, f.lastFailure ?? new ProviderFailure(PROVIDER_ERROR_CODES.timeout, `The prediction ${f.id} did not finish by the job's deadline.`));
    }
    schedule(f, context.pollIntervalMs);
  }

  function observe(f: Follow, prediction: Prediction): void {
    if (f.ended || closing.signal.aborted) return;
    if (prediction.status === 'processing' && !f.running) {
      f.running = true;
      tell(f, { type: 'running' });
    }
    const tail = logTail(prediction.logs, secrets);
    if (tail !== '' && tail !== f.lastTail) {
      f.lastTail = tail;
      tell(f, { type: 'progress', detail: tail });
    }
    if (!isTerminal(prediction.status)) return;
    f.ended = true;
    clearTimeout(f.timer);
    follows.delete(f.id);
    void finish(f, prediction);
  }

  async function finish(f: Follow, prediction: Prediction): Promise<void> {
    if (prediction.status !== 'succeeded') {
      const failure = endFailure(prediction, context.now() >= f.job.deadline, secrets);
      return tell(f, { type: 'failed', errorCode: failure.code, errorMessage: failure.message });
    }
    try {
      const result = await collectOutputs(f.job.mode, prediction.output, { fetchOutput: context.fetchOutput, maxOutputBytes: context.maxOutputBytes, secrets });
      const usage = tokenUsage(prediction.metrics);
      tell(f, {
        type: 'succeeded',
        files: result.files,
        ...(result.textOutput === undefined ? {} : { textOutput: result.textOutput }),
        ...(usage ? { usage } : {}),
      });
    } catch (error) {
      const failure = error instanceof ProviderFailure ? error : new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, upstreamMessage(String(error), secrets));
      tell(f, { type: 'failed', errorCode: failure.code, errorMessage: failure.message });
    }
  }

  async function cancelAt(id: string): Promise<void> {
    try {
      await call('POST', `/predictions/${encodeURIComponent(id)}/cancel`);
    } catch {
      // Whatever Replicate answers (already finished, unknown, unreachable), a cancel does not throw.
    }
  }

  return {
    kind: 'replicate',
    maxConcurrentJobs: settings.maxConcurrentJobs,

    async submit(job, report) {
      if (closing.signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, 'The Replicate adapter is closed.');
      const body = {
        ...route.body,
        input: predictionInput(job, deployment.target),
        ...(sendsWebhooks ? { webhook: context.eventsUrl, webhook_events_filter: ['start', 'completed'] } : {}),
      };
      const response = await retryingRateLimits(
        () => {
          const remainingMs = job.deadline - context.now();
          if (remainingMs <= 0) throw new ProviderFailure(PROVIDER_ERROR_CODES.timeout, 'The job passed its deadline before Replicate accepted it.');
          // Whole seconds, rounded up, in the duration form Replicate's examples use (`Cancel-After: 1m`).
          return call('POST', route.path, body, { 'cancel-after': `${Math.max(1, Math.ceil(remainingMs / 1000))}s` });
        },
        job.deadline,
        context.now,
        (waitMs) => report({ type: 'progress', detail: `Replicate is rate limiting (429); trying again in ${Math.ceil(waitMs / 1000)} s.` }),
        1_000,
        closing.signal,
      );
      if (response.status < 200 || response.status > 299) throw statusFailure(response, problemDetail(response.json, response.text), secrets);
      const prediction = readPrediction(response.json);
      if (!prediction) {
        throw new ProviderFailure(
          PROVIDER_ERROR_CODES.badResponse,
          `Replicate's answer to the create is not a prediction: ${upstreamMessage(response.text.slice(0, 200), secrets)}`,
        );
      }
      follow(prediction.id, job, report, prediction);
      return { providerJobId: prediction.id };
    },

    resume(providerJobId, job, report) {
      if (closing.signal.aborted) return;
      follow(providerJobId, job, report);
    },

    async cancel(providerJobId) {
      // The job ended on our side: stop following it quietly, then ask Replicate to stop it.
      const f = follows.get(providerJobId);
      if (f) {
        f.ended = true;
        clearTimeout(f.timer);
        follows.delete(providerJobId);
      }
      await cancelAt(providerJobId);
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
      return { ok: true, providerJobId: prediction.id, eventId: verdict.id, payload };
    },

    deliverEvent(providerJobId, payload) {
      const f = follows.get(providerJobId);
      const prediction = readPrediction(payload);
      if (!f || !prediction || prediction.id !== providerJobId) return;
      observe(f, prediction);
      // An event came: the backstop poll waits a whole interval from now.
      if (!f.ended) schedule(f, context.pollIntervalMs);
    },

    async close() {
      closing.abort();
      for (const f of follows.values()) clearTimeout(f.timer);
      follows.clear();
    },
  };
}
