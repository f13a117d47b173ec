import { context, isSpanContextValid, ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * The W3C traceparent of the span active now (the generation's work that makes an event), or null when
 * there is none (tracing off). Stored with each delivery, so every attempt continues that trace.
 */
export function currentTraceparent(): string | null {
  const span = trace.getSpanContext(context.active());
  if (!span || !isSpanContextValid(span)) return null;
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 1) === 1 ? '01' : '00'}`;
}

/**
 * The context an attempt's span starts from: the stored traceparent as a remote parent, whatever the
 * message that started the attempt (a timer's retry, a wake after a restart) carried; undefined without one.
 */
export function parentContextOf(traceparent: string | null | undefined): Context | undefined {
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!match) return undefined;
  const spanContext = { traceId: match[1]!, spanId: match[2]!, traceFlags: Number.parseInt(match[3]!, 16) & 1, isRemote: true };
  return isSpanContextValid(spanContext) ? trace.setSpanContext(ROOT_CONTEXT, spanContext) : undefined;
}
