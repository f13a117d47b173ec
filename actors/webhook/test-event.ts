import { randomBytes } from 'node:crypto';
import { isSpanContextValid, SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import { EgressError, fetchGuarded } from '../../runtime/egress.ts';
import { newId } from '../../persistence/ids.ts';
import type { SignatureScheme } from '../../persistence/stores/webhooks/rows.ts';
import { signatureHeaders } from './signing.ts';

export const TEST_EVENT = 'webhook.test';
/** A receiver's answer body is read up to this size and dropped, as for deliveries. */
const MAX_RESPONSE_BYTES = 256 * 1024;

/** The endpoint as a test event needs it: where, how signed, with which secrets (opened). */
export interface TestTarget {
  id: string;
  workspaceId: string;
  url: string;
  signatureScheme: SignatureScheme;
  secret: string;
  previousSecret: string | undefined;
  previousSecretExpiresAt: Date | null;
}

export interface TestSendOptions {
  now: number;
  timeoutMs: number;
  allowPrivateEgress: boolean;
  allowLoopbackEgress: boolean | undefined;
  tracer: Tracer;
}

/** What came of the one attempt: `delivered` for a 2xx; `error` as in a delivery's attempt record. */
export interface TestOutcome {
  id: string;
  event: typeof TEST_EVENT;
  delivered: boolean;
  responseStatus: number | null;
  durationMs: number;
  error: string | null;
}

/**
 * Sends one signed `webhook.test` event to an endpoint now, outside its queue: no delivery row is made, so
 * no real delivery waits for it or is reordered by it, and nothing retries it. Signed and sent exactly
 * like a delivery (the endpoint's scheme and live secrets, the egress guard at connect time, the attempt
 * time-out, no redirects), so a receiver that accepts it accepts real deliveries.
 */
export async function sendTestEvent(target: TestTarget, options: TestSendOptions): Promise<TestOutcome> {
  const id = newId('dlv', options.now);
  const body = JSON.stringify({
    id,
    event: TEST_EVENT,
    data: { endpointId: target.id, workspaceId: target.workspaceId },
    createdAt: new Date(options.now).toISOString(),
  });
  const span = options.tracer.startSpan('webhook test attempt', {
    kind: SpanKind.CLIENT,
    attributes: { 'webhook.endpoint.id': target.id, 'webhook.delivery.id': id, 'webhook.event': TEST_EVENT },
  });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'generation-service-webhooks/1',
    ...signatureHeaders(
      { scheme: target.signatureScheme, secret: target.secret, previousSecret: target.previousSecret, previousSecretExpiresAt: target.previousSecretExpiresAt },
      id,
      body,
      options.now,
    ),
    'x-service-event': TEST_EVENT,
    'x-service-delivery': id,
  };
  // The span of this request's trace; a random one when tracing is off, like a delivery's.
  const context = span.spanContext();
  headers.traceparent = isSpanContextValid(context)
    ? `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 1) === 1 ? '01' : '00'}`
    : `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`;
  const started = performance.now();
  let outcome: Omit<TestOutcome, 'id' | 'event' | 'durationMs'>;
  try {
    const response = await fetchGuarded(target.url, {
      method: 'POST',
      headers,
      body,
      maxRedirects: 0,
      maxBytes: MAX_RESPONSE_BYTES,
      timeoutMs: options.timeoutMs,
      allowPrivate: options.allowPrivateEgress,
      allowLoopback: options.allowLoopbackEgress,
    });
    const ok = response.status >= 200 && response.status <= 299;
    outcome = { delivered: ok, responseStatus: response.status, error: ok ? null : `the endpoint answered ${response.status}` };
    span.setAttribute('http.response.status_code', response.status);
  } catch (error) {
    const message = error instanceof EgressError ? `${error.code}: ${error.message}` : `network_error: ${(error as Error).message}`;
    outcome = { delivered: false, responseStatus: null, error: message.slice(0, 500) };
  }
  span.setStatus({ code: outcome.delivered ? SpanStatusCode.OK : SpanStatusCode.ERROR });
  span.end();
  return { id, event: TEST_EVENT, ...outcome, durationMs: Math.max(0, Math.round(performance.now() - started)) };
}
