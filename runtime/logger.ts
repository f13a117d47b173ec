import { pino, type Logger } from 'pino';
import { trace } from '@opentelemetry/api';
import type { LogLevel } from './config.ts';

export type { Logger };

/** Structured JSON logs; each line carries the active trace id when there is one. */
export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  return pino({
    level,
    base: { service: 'generation-service' },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { traceId, spanId };
    },
    redact: { paths: ['password', '*.password', 'authorization', '*.authorization', 'cookie', '*.cookie'], censor: '[redacted]' },
  }, destination);
}
