import type { Counter, Histogram, Meter } from '@opentelemetry/api';
import { AttributeCache, secondsHistogram } from './instruments.ts';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE']);

/** HTTP server metrics: one histogram record per answered request (its count is the request count). */
export class HttpMetrics {
  private readonly duration: Histogram;
  private readonly refusals: Counter;
  private readonly attributes = new AttributeCache<Record<string, string | number>>();
  private readonly routes = new AttributeCache<Record<string, string>>();

  constructor(meter: Meter) {
    this.duration = secondsHistogram(meter, 'http.server.request.duration', 'Duration of HTTP server requests, by route template, method and status.');
    this.refusals = meter.createCounter('gs.rate_limit.refusals', { description: 'Requests refused with 429 rate_limited (per-key limit or sign-in throttle), by route template.', unit: '{request}' });
  }

  /** `route` is the route template (`/v1/generations/{id}`) or `unmatched`; status 0 when the client left unanswered. */
  request(method: string, route: string, status: number, seconds: number): void {
    // Clients choose the method: any other than the known ones is `_OTHER` (semantic conventions), so the series stay bounded.
    if (!KNOWN_METHODS.has(method)) method = '_OTHER';
    const key = `${method} ${status} ${route}`;
    const attributes = this.attributes.get(key, () => ({ 'http.request.method': method, 'http.route': route, 'http.response.status_code': status }));
    this.duration.record(seconds, attributes);
    if (status === 429) this.refusals.add(1, this.routes.get(route, () => ({ 'http.route': route })));
  }
}
