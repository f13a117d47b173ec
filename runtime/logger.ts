import { pino, type Logger } from 'pino';
import { trace } from '@opentelemetry/api';
import type { LogLevel } from './config.ts';
import { requestScope } from './request-scope.ts';

export type { Logger };

/** Structured JSON logs; each line carries the request id and trace id of the work it belongs to. */
export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  return pino({
    level,
    base: { service: 'generation-service' },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin() {
      const requestId = requestScope.getStore()?.requestId;
      const span = trace.getActiveSpan();
      if (!span) return requestId ? { requestId } : {};
      const { traceId, spanId } = span.spanContext();
      return requestId ? { requestId, traceId, spanId } : { traceId, spanId };
    },
    redact: { paths: ['password', '*.password', 'authorization', '*.authorization', 'cookie', '*.cookie'], censor: '[redacted]' },
  }, destination);
}
