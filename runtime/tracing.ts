import { context, propagation, ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api';
import { currentRequestId, runInRequest } from './request-scope.ts';

/** The tracer of the service's own spans (the no-op one while tracing is off). */
export function serviceTracer() {
  return trace.getTracer('generation-service');
}

/**
 * What a job keeps of the request that created it, to run its later work in that request's trace (and
 * under its request id) when it starts, perhaps after a restart: the W3C trace context, and the request id.
 */
export interface JobContext {
  traceparent: string;
  tracestate?: string;
  requestId?: string;
}

/** The job context of the work running now; null when it is in no trace and no request. */
export function captureJobContext(active: Context = context.active()): JobContext | null {
  const requestId = currentRequestId();
  const carrier: Record<string, string> = {};
  if (trace.getSpanContext(active)) propagation.inject(active, carrier);
  if (!carrier.traceparent) return null;
  const job: JobContext = { traceparent: carrier.traceparent };
  if (carrier.tracestate) job.tracestate = carrier.tracestate;
  if (requestId !== undefined) job.requestId = requestId;
  return job;
}

/** A job context read back from the database (jsonb, or its text), or null if it is not one. */
export function jobContextOf(stored: unknown): JobContext | null {
  const value = typeof stored === 'string' ? safeParse(stored) : stored;
  if (typeof value !== 'object' || value === null) return null;
  const { traceparent, tracestate, requestId } = value as Record<string, unknown>;
  if (typeof traceparent !== 'string') return null;
  return {
    traceparent,
    ...(typeof tracestate === 'string' ? { tracestate } : {}),
    ...(typeof requestId === 'string' ? { requestId } : {}),
  };
}

/**
 * Runs `fn` (which sends the job's messages) in the job's own trace and request scope, not in those of the
 * work that happened to start it (another job's end freed its slot, a restart recovered it). With no job
 * context (tracing was off when it was created), in neither.
 */
export function withJobContext<T>(job: JobContext | null | undefined, fn: () => T): T {
  const restored = job
    ? propagation.extract(ROOT_CONTEXT, job.tracestate ? { traceparent: job.traceparent, tracestate: job.tracestate } : { traceparent: job.traceparent })
    : ROOT_CONTEXT;
  return runInRequest(job?.requestId, () => context.with(restored, fn), undefined);
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * A URL fit for a span attribute or a log line: no user name or password, no query string (signed URLs
 * and webhook receivers often carry a token there), no fragment.
 */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    parsed.search = '';
    parsed.hash = '';
    return parsed.toString();
  } catch {
    return '[invalid url]';
  }
}

/** server.address and server.port of a URL, for a client span. */
export function serverOf(url: string): { 'server.address'?: string; 'server.port'?: number } {
  try {
    const parsed = new URL(url);
    const port = parsed.port ? Number(parsed.port) : parsed.protocol === 'https:' ? 443 : 80;
    return { 'server.address': parsed.hostname.replace(/^\[|\]$/g, ''), 'server.port': port };
  } catch {
    return {};
  }
}
