import type { Span } from '@opentelemetry/api';
import type { Principal } from '../route.ts';
import type { Logger } from '../../runtime/logger.ts';

/** What the access log says of a request once it is answered. */
export interface LoggedRequest {
  readonly incoming: { readonly method: string };
  readonly routeLabel: string;
  readonly status: number | undefined;
  /** performance.now() when the request arrived. */
  readonly started: number;
  readonly requestId: string;
  readonly span: Span | undefined;
  readonly principal: Principal | undefined;
  readonly workspaceId: string | undefined;
}

/**
 * The access log line (ACCESS_LOG): what was asked, of which route, by whom, and how it went; no body, no
 * header value, no query string.
 */
export function logAccess(logger: Logger, request: LoggedRequest): void {
  const principal = request.principal;
  const spanContext = request.span?.spanContext();
  logger.info(
    {
      access: true,
      method: request.incoming.method,
      route: request.routeLabel,
      status: request.status ?? 0,
      durationMs: Math.round((performance.now() - request.started) * 1000) / 1000,
      requestId: request.requestId,
      ...(spanContext ? { traceId: spanContext.traceId, spanId: spanContext.spanId } : {}),
      ...(principal?.kind === 'key' ? { keyId: principal.keyId } : {}),
      ...(principal?.kind === 'session' ? { userId: principal.userId } : {}),
      ...(request.workspaceId ? { workspaceId: request.workspaceId } : {}),
    },
    'request',
  );
}

/** The workspace a request names (path, query or body `workspaceId`), for the access log. */
export function workspaceNamed(params: Record<string, string>, query: Record<string, unknown>, body: unknown): string | undefined {
  const fromBody = typeof body === 'object' && body !== null ? (body as { workspaceId?: unknown }).workspaceId : undefined;
  for (const value of [params.workspaceId, query.workspaceId, fromBody]) if (typeof value === 'string') return value;
  return undefined;
}
