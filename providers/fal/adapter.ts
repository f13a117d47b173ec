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
import { type CallContext, failedUpdate, type Followed, followedAdapter, type Look, type ProtocolModule } from '../follower.ts';
import { requestUpstream, retryingRateLimits, statusFailure, type UpstreamRequest, type UpstreamResponse } from '../upstream-http.ts';
import type { FalDeploymentTarget } from './deployment.ts';
import { detailText, resultFailure, webhookFailure } from './failures.ts';
import { falInput } from './inputs.ts';
import { readOutputs } from './outputs.ts';
import { answeredUrl, parseEndpointId, parseProviderJobId, providerJobIdOf, queueUrls, type QueueUrls } from './queue-urls.ts';
import { falJobOf, falWebhookUrl } from './job-token.ts';
import { FAL_RESUBMIT_GRACE_MS, type FalSettings } from './settings.ts';
import { checkWebhookSignature } from './signature.ts';

/**
 * One fal deployment (an endpoint such as `fal-ai/flux/dev`) run through fal's queue
 * (https://docs.fal.ai/model-endpoints/queue), with plain undici calls through upstream-http.ts rather than
 * @fal-ai/client: the client retries a submission after a 502-504 or a dropped connection (which may run
 * and bill the job twice), reads answers without a size bound, and uploads Blob inputs to fal's storage.
 *
 * A protocol module on the job follower (providers/follower.ts), which owns the polls, events, deadline and
 * cancels. A job: POST the endpoint (with `?fal_webhook=` when events can be verified); each look GETs its
 * status URL with `?logs=1` (every pollMs, the backstop when a webhook is asked for) until COMPLETED, then
 * its result URL; a signed webhook delivering the result ends it sooner. Queue positions and new log lines
 * go to the job's timeline. A status check that fails (5xx, time-out, not JSON) is tried again, up to
 * MAX_POLL_FAILURES in a row; a result is read once (fal keeps it, so it would answer the same again).
 */
const MAX_POLL_FAILURES = 3;
/** Log lines put in one progress update. */
const LOG_LINES = 3;

/** What the follower keeps of a fal job for this module. */
export interface FalNotes {
  urls: QueueUrls;
  queuePosition?: number;
  logsSeen: number;
  pollFailures: number;
}

export function createFalAdapter(settings: FalSettings, deployment: { id: string; target: FalDeploymentTarget }, context: AdapterContext): ProviderAdapter {
  return followedAdapter(falProtocol(settings, deployment, context), context);
}

export function falProtocol(settings: FalSettings, deployment: { id: string; target: FalDeploymentTarget }, context: AdapterContext): ProtocolModule<FalNotes> {
  const endpoint = parseEndpointId(deployment.target.endpoint);
  if (!endpoint) throw new Error(`fal deployment ${deployment.id}: ${JSON.stringify(deployment.target.endpoint)} is not an endpoint id (owner/app[/subpath])`);
  const secrets = [settings.key, ...settings.key.split(':').filter((part) => part.length >= 8)];
  const webhooks = context.eventsUrl !== undefined && settings.webhookKeys.length > 0;
  const graceMs = settings.resubmitGraceMs ?? FAL_RESUBMIT_GRACE_MS;
  type Job = Followed<FalNotes>;

  function call(method: UpstreamRequest['method'], url: string, signal: AbortSignal, body?: string): Promise<UpstreamResponse> {
    const headers: Record<string, string> = { authorization: `Key ${settings.key}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return requestUpstream(url, { method, headers, body, timeoutMs: context.requestTimeoutMs, maxBytes: context.maxResponseBytes, signal });
  }

  /** Retries a call while fal answers 429, as long as its Retry-After ends before the deadline. */
  function callPatiently(job: AdapterJob, on: CallContext, method: UpstreamRequest['method'], url: string, body?: string) {
    const onWait = (ms: number) => on.say(`fal answered 429 (too many requests); waiting ${Math.ceil(ms / 1000)} s`);
    return retryingRateLimits(() => call(method, url, on.signal, body), job.deadline, context.now, onWait, 1_000, on.signal, {
      ...(context.rateLimitAttempts !== undefined ? { maxAttempts: context.rateLimitAttempts } : {}),
      sleep: on.wait,
    });
  }

  const failed = (failure: unknown): Look => ({ type: 'over', update: failedUpdate(failure, secrets) });

  /** A status check that failed: tried again at the next look, up to MAX_POLL_FAILURES in a row. */
  function trouble(f: Job, error: unknown): Look {
    f.notes.pollFailures += 1;
    if (f.notes.pollFailures >= MAX_POLL_FAILURES) return failed(error);
    return { type: 'pending', progress: [`fal's status could not be read (${failedUpdate(error, secrets).errorMessage}); trying again`] };
  }

  function logLines(f: Job, logs: unknown): string[] {
    if (!Array.isArray(logs)) return [];
    if (logs.length < f.notes.logsSeen) f.notes.logsSeen = 0;
    const lines = logs
      .slice(f.notes.logsSeen)
      .map((line) => (line as { message?: unknown } | null)?.message)
      .filter((message): message is string => typeof message === 'string' && message.trim() !== '');
    f.notes.logsSeen = logs.length;
    return lines.length > 0 ? [upstreamMessage(lines.slice(-LOG_LINES).join(' | '), secrets)] : [];
  }

  /** Reads the result URL once the job is COMPLETED (or a webhook came without its payload). */
  async function fromResult(f: Job, on: CallContext): Promise<Look> {
    let response: UpstreamResponse;
    try {
      response = await callPatiently(f.job, on, 'GET', f.notes.urls.response);
    } catch (error) {
      // The result stays at fal: a failed read is tried again from the next look.
      return trouble(f, error);
    }
    if (response.status < 200 || response.status > 299) return failed(resultFailure(response, secrets));
    if (response.json === undefined) {
      return failed(
        new ProviderFailure(PROVIDER_ERROR_CODES.badResponse, `fal's result is not JSON: ${upstreamMessage(response.text.slice(0, 200), secrets)}`),
      );
    }
    return fromPayload(f, response.json);
  }

  async function fromPayload(f: Job, result: unknown): Promise<Look> {
    try {
      const outputs = await readOutputs(result, f.job.mode, deployment.target.textField, context, secrets);
      return { type: 'over', update: { type: 'succeeded', ...outputs } };
    } catch (error) {
      return failed(error);
    }
  }

  function notesOf(providerJobId: string): FalNotes | undefined {
    const parsed = parseProviderJobId(providerJobId);
    return parsed ? { urls: queueUrls(settings.queueUrl, parsed.app, parsed.requestId), logsSeen: 0, pollFailures: 0 } : undefined;
  }

  return {
    kind: 'fal',
    // Our state machine takes `succeeded` from running only; fal may complete before a look saw IN_PROGRESS.
    runningBeforeSuccess: true,
    ...(settings.maxConcurrentJobs !== undefined ? { maxConcurrentJobs: settings.maxConcurrentJobs } : {}),

    adoption: {
      windowMs: webhooks ? graceMs : 0,
      keeps: (providerJobId) => parseProviderJobId(providerJobId) !== undefined,
      waiting: (ms) => `Waiting up to ${Math.round(ms / 1000)} s for the end of a request fal may have taken before the restart.`,
    },

    async submit(job, on) {
      const body = JSON.stringify(falInput(job, deployment.target.files));
      const url = new URL(`${settings.queueUrl}/${deployment.target.endpoint}`);
      if (webhooks) url.searchParams.set('fal_webhook', falWebhookUrl(context.eventsUrl!, settings.key, job.generationId));
      const response = await callPatiently(job, on, 'POST', url.href, body);
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
      return { providerJobId: providerJobIdOf(endpoint.app, requestId), notes: { urls, logsSeen: 0, pollFailures: 0 } };
    },

    resume(providerJobId) {
      const notes = notesOf(providerJobId);
      if (notes) return { notes };
      return {
        failure: new ProviderFailure(PROVIDER_ERROR_CODES.error, `${JSON.stringify(providerJobId.slice(0, 200))} is not a fal job id (app:request_id).`),
      };
    },

    async get(f, on) {
      const url = new URL(f.notes.urls.status);
      url.searchParams.set('logs', '1');
      let response: UpstreamResponse;
      try {
        response = await callPatiently(f.job, on, 'GET', url.href);
      } catch (error) {
        return trouble(f, error);
      }
      if (response.status === 429) return failed(statusFailure(response, detailText(response.json) ?? response.text, secrets));
      if (response.status >= 500) return trouble(f, statusFailure(response, detailText(response.json) ?? response.text, secrets));
      if (response.status < 200 || response.status > 299) {
        const failure = statusFailure(response, detailText(response.json) ?? response.text, secrets);
        // A request fal does not know is no fault of the input.
        return failed(response.status === 404 ? new ProviderFailure(PROVIDER_ERROR_CODES.error, failure.message) : failure);
      }
      const status = (response.json as { status?: unknown } | undefined)?.status;
      if (status !== 'IN_QUEUE' && status !== 'IN_PROGRESS' && status !== 'COMPLETED') {
        return trouble(
          f,
          new ProviderFailure(
            PROVIDER_ERROR_CODES.badResponse,
            `fal's status answer is not one the API documents: ${upstreamMessage(response.text.slice(0, 200), secrets)}`,
          ),
        );
      }
      f.notes.pollFailures = 0;
      const answer = response.json as { queue_position?: unknown; logs?: unknown; response_url?: unknown };
      if (status === 'COMPLETED') {
        f.notes.urls.response = answeredUrl(answer.response_url, settings.queueUrl, f.notes.urls.response);
        return { type: 'ending', settle: (then) => fromResult(f, then) };
      }
      if (status === 'IN_QUEUE') {
        if (typeof answer.queue_position !== 'number' || answer.queue_position === f.notes.queuePosition) return { type: 'pending' };
        f.notes.queuePosition = answer.queue_position;
        return { type: 'pending', progress: [`In fal's queue at position ${answer.queue_position}`] };
      }
      return { type: 'pending', running: true, progress: logLines(f, answer.logs) };
    },

    async cancel(providerJobId, notes, signal) {
      const url = notes?.urls.cancel ?? notesOf(providerJobId)?.urls.cancel;
      if (!url) return;
      try {
        // 202 CANCELLATION_REQUESTED, 400 ALREADY_COMPLETED, 404 NOT_FOUND: whichever, there is nothing more to do.
        await call('PUT', url, signal);
      } catch {
        // Unreachable or slow: the job is over for us either way.
      }
    },

    overdue: () => ({
      type: 'failed',
      errorCode: PROVIDER_ERROR_CODES.timeout,
      errorMessage: 'The job was not over at fal by its deadline; it was cancelled there.',
    }),

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
      const jobId = falJobOf(event.query, settings.key);
      if (jobId === 'wrong') return { ok: false, message: "the fal webhook URL's job token is wrong" };
      return {
        ok: true,
        providerJobId: providerJobIdOf(endpoint.app, check.requestId),
        eventId: `${check.requestId}:${status}`,
        payload,
        ...(jobId ? { jobId } : {}),
      };
    },

    parseEvent(f, payload) {
      const delivery = (payload ?? {}) as { status?: unknown; payload?: unknown; error?: unknown; payload_error?: unknown };
      if (delivery.status === 'ERROR') return failed(webhookFailure(delivery, secrets));
      if (delivery.status !== 'OK') return { type: 'pending' };
      // A payload fal could not serialise comes as null with payload_error: the result URL still has it.
      const result = delivery.payload;
      if (result && typeof result === 'object') return { type: 'ending', settle: () => fromPayload(f, result) };
      return { type: 'ending', settle: (then) => fromResult(f, then) };
    },
  };
}
