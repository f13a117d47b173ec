import {
  PROVIDER_ERROR_CODES,
  ProviderFailure,
  upstreamMessage,
  type AdapterContext,
  type AdapterJob,
  type AdapterUpdate,
  type InboundEvent,
  type ProviderAdapter,
  type Report,
  type VerifiedEvent,
} from '../adapter.ts';
import { requestUpstream, retryingRateLimits, statusFailure, type UpstreamRequest, type UpstreamResponse } from '../upstream-http.ts';
import type { FalDeploymentTarget } from './deployment.ts';
import { detailText, resultFailure, webhookFailure } from './failures.ts';
import { falInput } from './inputs.ts';
import { readOutputs } from './outputs.ts';
import { answeredUrl, parseEndpointId, parseProviderJobId, providerJobIdOf, queueUrls, type QueueUrls } from './queue-urls.ts';
import type { FalSettings } from './settings.ts';
import { checkWebhookSignature } from './signature.ts';

/**
 * One fal deployment (an endpoint such as `fal-ai/flux/dev`) run through fal's queue
 * (https://docs.fal.ai/model-endpoints/queue), with plain undici calls through upstream-http.ts rather than
 * @fal-ai/client: the client retries a submission after a 502-504 or a dropped connection (which may run
 * and bill the job twice), reads answers without a size bound, and uploads Blob inputs to fal's storage.
 *
 * A job: POST the endpoint (with `?fal_webhook=` when events can be verified), then GET its status URL
 * with `?logs=1` every pollIntervalMs (the backstop when a webhook is asked for) until COMPLETED, then GET
 * its result URL; a signed webhook delivering the result ends it sooner. Queue positions and new log lines
 * go to the job's timeline. A status check that fails (5xx, time-out, not JSON) is tried again, up to
 * MAX_POLL_FAILURES in a row; a result is read once (fal keeps it, so it would answer the same again).
 */
const MAX_POLL_FAILURES = 3;
/** Log lines put in one progress update. */
const LOG_LINES = 3;

interface Follow {
  providerJobId: string;
  requestId: string;
  urls: QueueUrls;
  job: AdapterJob;
  report: Report;
  /** following: polling; settling: the result is being read; ended: reported its end, or dropped. */
  phase: 'following' | 'settling' | 'ended';
  running: boolean;
  queuePosition?: number;
  logsSeen: number;
  pollFailures: number;
  timer?: NodeJS.Timeout;
  abort: AbortController;
}

export function createFalAdapter(settings: FalSettings, deployment: { id: string; target: FalDeploymentTarget }, context: AdapterContext): ProviderAdapter {
  const endpoint = parseEndpointId(deployment.target.endpoint);
  if (!endpoint) throw new Error(`fal deployment ${deployment.id}: ${JSON.stringify(deployment.target.endpoint)} is not an endpoint id (owner/app[/subpath])`);
  const secrets = [settings.key, ...settings.key.split(':').filter((part) => part.length >= 8)];
  const webhooks = context.eventsUrl !== undefined && settings.webhookKeys.length > 0;
  const follows = new Map<string, Follow>();
  const closing = new AbortController();

  function call(method: UpstreamRequest['method'], url: string, signal: AbortSignal, body?: string): Promise<UpstreamResponse> {
    const headers: Record<string, string> = { authorization: `Key ${settings.key}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return requestUpstream(url, { method, headers, body, timeoutMs: context.requestTimeoutMs, maxBytes: context.maxResponseBytes, signal });
  }

  /** Retries a call while fal answers 429, as long as its Retry-After ends before the deadline. */
  function callPatiently(f: Pick<Follow, 'job' | 'report'>, method: UpstreamRequest['method'], url: string, signal: AbortSignal, body?: string) {
    const onWait = (ms: number) => f.report({ type: 'progress', detail: `fal answered 429 (too many requests); waiting ${Math.ceil(ms / 1000)} s` });
    return retryingRateLimits(() => call(method, url, signal, body), f.job.deadline, context.now, onWait, 1_000, signal);
  }

  function end(f: Follow, update?: AdapterUpdate): void {
    if (f.phase === 'ended') return;
    f.phase = 'ended';
    clearTimeout(f.timer);
    f.abort.abort();
    if (follows.get(f.providerJobId) === f) follows.delete(f.providerJobId);
    if (!update || closing.signal.aborted) return;
    // Our state machine takes `succeeded` from running only; fal may complete before a poll saw IN_PROGRESS.
    if (update.type === 'succeeded' && !f.running) f.report({ type: 'running' });
    f.report(update);
  }

  const fail = (f: Follow, failure: unknown) => end(f, failedUpdate(failure, secrets));

  function schedule(f: Follow, delayMs = context.pollIntervalMs): void {
    if (f.phase !== 'following') return;
    clearTimeout(f.timer);
    f.timer = setTimeout(() => void poll(f), delayMs);
  }

  async function poll(f: Follow): Promise<void> {
    if (f.phase !== 'following') return;
    if (context.now() >= f.job.deadline) return timeOut(f);
    const url = new URL(f.urls.status);
    url.searchParams.set('logs', '1');
    let response: UpstreamResponse;
    try {
      response = await callPatiently(f, 'GET', url.href, f.abort.signal);
    } catch (error) {
      return pollTrouble(f, error);
    }
    if (f.phase !== 'following') return;
    if (response.status === 429) return fail(f, statusFailure(response, detailText(response.json) ?? response.text, secrets));
    if (response.status >= 500) return pollTrouble(f, statusFailure(response, detailText(response.json) ?? response.text, secrets));
    if (response.status < 200 || response.status > 299) {
      const failure = statusFailure(response, detailText(response.json) ?? response.text, secrets);
      // A request fal does not know is no fault of the input.
      return fail(f, response.status === 404 ? new ProviderFailure(PROVIDER_ERROR_CODES.error, failure.message) : failure);
    }
    const status = (response.json as { status?: unknown } | undefined)?.status;
    if (status !== 'IN_QUEUE' && status !== 'IN_PROGRESS' && status !== 'COMPLETED') {
      return pollTrouble(
        f,
        new ProviderFailure(
          PROVIDER_ERROR_CODES.badResponse,
          `fal's status answer is not one the API documents: ${upstreamMessage(response.text.slice(0, 200), secrets)}`,
        ),
      );
    }
    f.pollFailures = 0;
    const answer = response.json as { queue_position?: unknown; logs?: unknown; response_url?: unknown };
    if (status === 'COMPLETED') {
      f.urls.response = answeredUrl(answer.response_url, settings.queueUrl, f.urls.response);
      return settleFromResult(f);
    }
    if (status === 'IN_QUEUE') {
      if (typeof answer.queue_position === 'number' && answer.queue_position !== f.queuePosition) {
        f.queuePosition = answer.queue_position;
        f.report({ type: 'progress', detail: `In fal's queue at position ${answer.queue_position}` });
      }
    } else {
      if (!f.running) {
        f.running = true;
        f.report({ type: 'running' });
      }
      reportLogs(f, answer.logs);
    }
    schedule(f);
  }

  function reportLogs(f: Follow, logs: unknown): void {
    if (!Array.isArray(logs)) return;
    if (logs.length < f.logsSeen) f.logsSeen = 0;
    const lines = logs
      .slice(f.logsSeen)
      .map((line) => (line as { message?: unknown } | null)?.message)
      .filter((message): message is string => typeof message === 'string' && message.trim() !== '');
    f.logsSeen = logs.length;
    if (lines.length > 0) f.report({ type: 'progress', detail: upstreamMessage(lines.slice(-LOG_LINES).join(' | '), secrets) });
  }

  function pollTrouble(f: Follow, error: unknown): void {
    if (f.phase !== 'following') return;
    f.pollFailures += 1;
    if (f.pollFailures >= MAX_POLL_FAILURES) return fail(f, error);
    f.report({ type: 'progress', detail: `fal's status could not be read (${failedUpdate(error, secrets).errorMessage}); trying again` });
    schedule(f);
  }

  function timeOut(f: Follow): void {
    end(f, { type: 'failed', errorCode: PROVIDER_ERROR_CODES.timeout, errorMessage: 'The job was not over at fal by its deadline; it was cancelled there.' });
    void cancelAtFal(f.urls.cancel);
  }

  /** Reads the result URL once the job is COMPLETED (or a webhook came without its payload). */
  async function settleFromResult(f: Follow): Promise<void> {
    f.phase = 'settling';
    clearTimeout(f.timer);
    let response: UpstreamResponse;
    try {
      response = await callPatiently(f, 'GET', f.urls.response, f.abort.signal);
    } catch (error) {
      if (f.phase !== 'settling') return;
      // The result stays at fal: a failed read is tried again from the next poll.
      f.phase = 'following';
      return pollTrouble(f, error);
    }
    if (f.phase !== 'settling') return;
    if (response.status < 200 || response.status > 299) return fail(f, resultFailure(response, secrets));
    if (response.json === undefined)
      return fail(
        f,
        new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `fal's result is not JSON: ${upstreamMessage(response.text.slice(0, 200), secrets)}`),
      );
    await settleWith(f, response.json);
  }

  async function settleWith(f: Follow, result: unknown): Promise<void> {
    f.phase = 'settling';
    clearTimeout(f.timer);
    try {
      const outputs = await readOutputs(result, f.job.mode, deployment.target.textField, context, secrets);
      if (f.phase === 'settling') end(f, { type: 'succeeded', ...outputs });
    } catch (error) {
      if (f.phase === 'settling') fail(f, error);
    }
  }

  async function cancelAtFal(url: string): Promise<void> {
    try {
      // 202 CANCELLATION_REQUESTED, 400 ALREADY_COMPLETED, 404 NOT_FOUND: whichever, there is nothing more to do.
      await call('PUT', url, closing.signal);
    } catch {
      // Unreachable or slow: the job is over for us either way.
    }
  }

  function follow(providerJobId: string, requestId: string, urls: QueueUrls, job: AdapterJob, report: Report, firstPollMs: number): void {
    const previous = follows.get(providerJobId);
    if (previous) end(previous);
    const f: Follow = {
      providerJobId,
      requestId,
      urls,
      job,
      report,
      phase: 'following',
      running: false,
      logsSeen: 0,
      pollFailures: 0,
      abort: new AbortController(),
    };
    follows.set(providerJobId, f);
    schedule(f, firstPollMs);
  }

  return {
    kind: 'fal',
    ...(settings.maxConcurrentJobs !== undefined ? { maxConcurrentJobs: settings.maxConcurrentJobs } : {}),

    async submit(job, report) {
      if (closing.signal.aborted) throw new ProviderFailure(PROVIDER_ERROR_CODES.unavailable, 'The fal adapter is closed.');
      const body = JSON.stringify(falInput(job, deployment.target.files));
      const url = new URL(`${settings.queueUrl}/${deployment.target.endpoint}`);
      if (webhooks) url.searchParams.set('fal_webhook', context.eventsUrl!);
      const response = await callPatiently({ job, report }, 'POST', url.href, closing.signal, body);
      if (response.status < 200 || response.status > 299) throw statusFailure(response, detailText(response.json) ?? response.text, secrets);
      const answer = response.json as { request_id?: unknown; status_url?: unknown; response_url?: unknown; cancel_url?: unknown } | undefined;
      const requestId = answer?.request_id;
      if (typeof requestId !== 'string' || !/^[A-Za-z0-9_-]{1,128}$/.test(requestId)) {
        throw new ProviderFailure(
          PROVIDER_ERROR_CODES.badResponse,
          `fal's answer to the submission has no request_id: ${upstreamMessage(response.text.slice(0, 200), secrets)}`,
        );
      }
      const rebuilt = queueUrls(settings.queueUrl, endpoint.app, requestId);
      const urls: QueueUrls = {
        status: answeredUrl(answer!.status_url, settings.queueUrl, rebuilt.status),
        response: answeredUrl(answer!.response_url, settings.queueUrl, rebuilt.response),
        cancel: answeredUrl(answer!.cancel_url, settings.queueUrl, rebuilt.cancel),
      };
      const providerJobId = providerJobIdOf(endpoint.app, requestId);
      follow(providerJobId, requestId, urls, job, report, context.pollIntervalMs);
      return { providerJobId };
    },

    resume(providerJobId, job, report) {
      if (closing.signal.aborted) return;
      const parsed = parseProviderJobId(providerJobId);
      if (!parsed) {
        report({
          type: 'failed',
          errorCode: PROVIDER_ERROR_CODES.error,
          errorMessage: `${JSON.stringify(providerJobId.slice(0, 200))} is not a fal job id (app:request_id).`,
        });
        return;
      }
      // Straight away: the job may have ended while nobody followed it.
      follow(providerJobId, parsed.requestId, queueUrls(settings.queueUrl, parsed.app, parsed.requestId), job, report, 0);
    },

    async cancel(providerJobId) {
      const f = follows.get(providerJobId);
      if (f) end(f);
      const parsed = parseProviderJobId(providerJobId);
      if (!parsed) return;
      await cancelAtFal(f?.urls.cancel ?? queueUrls(settings.queueUrl, parsed.app, parsed.requestId).cancel);
    },

    verifyEvent(event: InboundEvent): VerifiedEvent {
      const check = checkWebhookSignature(event.headers, event.body, event.now, settings.webhookKeys);
      if (!check.ok) return check;
      let payload: unknown;
      try {
        payload = JSON.parse(event.body.toString('utf8'));
      } catch {
        return { ok: false, message: 'the fal webhook body is not JSON' };
      }
      const { request_id: requestId, status } = (payload ?? {}) as { request_id?: unknown; status?: unknown };
      if (requestId !== check.requestId) return { ok: false, message: 'the fal webhook body is about another request than its signed header' };
      if (status !== 'OK' && status !== 'ERROR') return { ok: false, message: 'the fal webhook status is neither OK nor ERROR' };
      return { ok: true, providerJobId: providerJobIdOf(endpoint.app, check.requestId), eventId: `${check.requestId}:${status}`, payload };
    },

    deliverEvent(providerJobId, payload) {
      const f = follows.get(providerJobId);
      if (f?.phase !== 'following') return;
      const delivery = (payload ?? {}) as { status?: unknown; payload?: unknown; error?: unknown; payload_error?: unknown };
      if (delivery.status === 'ERROR') return fail(f, webhookFailure(delivery, secrets));
      if (delivery.status !== 'OK') return;
      // A payload fal could not serialise comes as null with payload_error: the result URL still has it.
      if (delivery.payload && typeof delivery.payload === 'object') void settleWith(f, delivery.payload);
      else void settleFromResult(f);
    },

    async close() {
      closing.abort();
      for (const f of [...follows.values()]) end(f);
    },
  };
}

function failedUpdate(failure: unknown, secrets: readonly string[]): Extract<AdapterUpdate, { type: 'failed' }> {
  if (failure instanceof ProviderFailure) return { type: 'failed', errorCode: failure.code, errorMessage: upstreamMessage(failure.message, secrets) };
  return { type: 'failed', errorCode: PROVIDER_ERROR_CODES.error, errorMessage: upstreamMessage((failure as Error)?.message ?? String(failure), secrets) };
}
