import { context, propagation, ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api';

/** The tracer of the service's own spans (the no-op one while tracing is off). */
export function serviceTracer() {
  return trace.getTracer('generation-service');
}

/**
 * The active trace context as text to store beside a job (W3C `traceparent`, then `tracestate` if any,
 * separated by a newline), or null when no span is active (tracing off, or work outside any trace).
 */
export function storableTraceContext(active: Context = context.active()): string | null {
  if (!trace.getSpanContext(active)) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(active, carrier);
  if (!carrier.traceparent) return null;
  return carrier.tracestate ? `${carrier.traceparent}\n${carrier.tracestate}` : carrier.traceparent;
}

/** The context a stored trace context stands for; the root context for none. */
export function restoredTraceContext(stored: string | null | undefined): Context {
  if (!stored) return ROOT_CONTEXT;
  const [traceparent, tracestate] = stored.split('\n');
  return propagation.extract(ROOT_CONTEXT, tracestate ? { traceparent, tracestate } : { traceparent });
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
