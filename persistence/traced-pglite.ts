import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { PGlite } from '@electric-sql/pglite';

/**
 * Spans for PGlite's statements, which no OpenTelemetry instrumentation sees (it is not the pg client): one
 * CLIENT span per statement run inside a span (a request, an actor message, a group commit), none outside
 * any (as the pg instrumentation with requireParentSpan). The attributes are those of PostgreSQL's spans:
 * PGlite is PostgreSQL, compiled to WebAssembly, so `db.system.name` is `postgresql` on both back ends.
 */
const TRACED = Symbol('traced');

export function tracePglite(instance: PGlite, namespace: string): void {
  const marked = instance as PGlite & { [TRACED]?: true };
  if (marked[TRACED]) return;
  marked[TRACED] = true;
  const query = instance.query.bind(instance);
  const exec = instance.exec.bind(instance);
  const traced = <T>(sql: string, run: () => Promise<T>): Promise<T> => {
    const parent = trace.getSpan(context.active());
    if (!parent?.isRecording()) return run();
    const operation = statementOperation(sql);
    // The tracer of the provider registered now, not of the one when the instance was first traced: a PGlite
    // handed to a later service start in the same process (the tests' pool) reports to that start's provider.
    const span = trace.getTracer('generation-service').startSpan(operation, {
      kind: SpanKind.CLIENT,
      attributes: {
        'db.system.name': 'postgresql',
        'db.namespace': namespace,
        'db.operation.name': operation,
        'db.query.text': sql.length > 2000 ? `${sql.slice(0, 2000)}…` : sql,
      },
    });
    return run().then(
      (result) => {
        span.end();
        return result;
      },
      (error: unknown) => {
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute('error.type', (error as { code?: string }).code ?? (error as Error).name ?? 'Error');
        span.end();
        throw error;
      },
    );
  };
  instance.query = ((sql: string, params?: unknown[], options?: unknown) => traced(sql, () => query(sql, params, options as never))) as PGlite['query'];
  instance.exec = ((sql: string, options?: unknown) => traced(sql, () => exec(sql, options as never))) as PGlite['exec'];
}

/** The statement's first keyword (SELECT, INSERT, BEGIN…), as db.operation.name. */
export function statementOperation(sql: string): string {
  const first = /^\s*([a-z]+)/i.exec(sql)?.[1]?.toUpperCase() ?? 'QUERY';
  if (first !== 'WITH') return first;
  // A statement after its common table expressions: the keyword that follows the last one's closing parenthesis.
  const after = [...sql.matchAll(/\)\s*(select|insert|update|delete|merge)\b/gi)].at(-1)?.[1];
  return after ? after.toUpperCase() : first;
}
