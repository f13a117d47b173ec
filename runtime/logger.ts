import { pino, type Logger } from 'pino';
import { trace } from '@opentelemetry/api';
import type { LogLevel } from './config.ts';
import { currentRequestId } from './request-scope.ts';

export type { Logger };

/**
 * Fields never written as they are, at any of the first three levels of a log line (pino's paths take one
 * wildcard a level): credentials by name, and the headers that carry them (`req.headers.authorization`,
 * `set-cookie`…). Passwords inside URLs (`postgres://user:secret@host`) are caught in the written line.
 */
const SECRET_FIELDS = [
  'password',
  'passwords',
  'newPassword',
  'currentPassword',
  'authorization',
  'cookie',
  '"set-cookie"',
  '"x-api-key"',
  'key',
  'apiKey',
  'secret',
  'signingSecret',
  'secretKey',
  'token',
  'accessToken',
  'refreshToken',
  'clientSecret',
  'secretAccessKey',
];
export const REDACTED_PATHS = SECRET_FIELDS.flatMap((field) => {
  const at = field.startsWith('"') ? `[${field}]` : `.${field}`;
  return [field.startsWith('"') ? `[${field}]` : field, `*${at}`, `*.*${at}`];
});

/** `scheme://user:password@` in any string of a line: the password goes. */
const URL_PASSWORD = /([a-z][a-z0-9+.-]*:\/\/[^\s/:@"]*):[^\s/@"]*@/gi;

/** The line with every password inside a URL replaced; the same string when it holds none (the usual case). */
export function withoutUrlPasswords(line: string): string {
  if (!line.includes('://') || !line.includes('@')) return line;
  return line.replace(URL_PASSWORD, '$1:[redacted]@');
}

/** Structured JSON logs; each line carries the request id and trace id of the work it belongs to. */
export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  const out = destination ?? pino.destination(1);
  const scrubbed: pino.DestinationStream = { write: (line: string) => out.write(withoutUrlPasswords(line)) };
  return pino(
    {
      level,
      base: { service: 'generation-service' },
      timestamp: pino.stdTimeFunctions.isoTime,
      mixin() {
        const requestId = currentRequestId();
        const span = trace.getActiveSpan();
        if (!span) return requestId ? { requestId } : {};
        const { traceId, spanId } = span.spanContext();
        return requestId ? { requestId, traceId, spanId } : { traceId, spanId };
      },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    },
    scrubbed,
  );
}
