import type { Config } from '../../runtime/config.ts';
import { ApiError } from '../errors.ts';

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const allowedByConfig = new WeakMap<Config, Set<string>>();

function allowedOrigins(config: Config): Set<string> {
  let allowed = allowedByConfig.get(config);
  if (!allowed) {
    allowed = new Set([new URL(config.baseUrl).origin, ...config.allowedOrigins]);
    allowedByConfig.set(config, allowed);
  }
  return allowed;
}

/**
 * Cross-site request forgery guard for cookie-authenticated writes: a browser always sends Origin on
 * a cross-origin POST/PUT/PATCH/DELETE, so a write whose Origin is not the service's own (or one of
 * ALLOWED_ORIGINS) is refused. Requests without Origin come from non-browser clients and pass.
 */
export function assertSameOrigin(config: Config, method: string, headers: Record<string, string>): void {
  if (!WRITE_METHODS.has(method)) return;
  const origin = headers.origin;
  if (origin === undefined) return;
  if (!allowedOrigins(config).has(origin)) {
    throw new ApiError('forbidden', 'Cross-origin writes with a session cookie are not allowed from this Origin.');
  }
}
