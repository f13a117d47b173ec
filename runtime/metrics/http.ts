import type { Counter } from '@opentelemetry/api';
import type { FastHistogram } from './histograms.ts';
import { AttributeCache, secondsHistogram, type Instruments } from './instruments.ts';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE']);

/** HTTP server metrics: one histogram record per answered request (its count is the request count). */
export class HttpMetrics {
  private readonly duration: FastHistogram;
  private readonly refusals: Counter;
  /** Attribute objects by route, method and status, made once each (a few map lookups per request, no string built). */
  private readonly attributes = new Map<string, Map<string, Map<number, Record<string, string | number>>>>();
  private readonly routes = new AttributeCache<Record<string, string>>();

  constructor(instruments: Instruments) {
    this.duration = secondsHistogram(instruments, 'http.server.request.duration', 'Duration of HTTP server requests, by route template, method and status.');
    this.refusals = instruments.meter.createCounter('gs.rate_limit.refusals', {
      description: 'Requests refused with 429 rate_limited (per-key limit or sign-in throttle), by route template.',
      unit: '{request}',
    });
  }

  /** `route` is the route template (`/v1/generations/{id}`) or `unmatched`; status 0 when the client left unanswered. */
  request(method: string, route: string, status: number, seconds: number): void {
    // Clients choose the method: any other than the known ones is `_OTHER` (semantic conventions), so the series stay bounded.
    if (!KNOWN_METHODS.has(method)) method = '_OTHER';
    let byMethod = this.attributes.get(route);
    if (byMethod === undefined) this.attributes.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let attributes = byStatus.get(status);
    if (attributes === undefined)
      byStatus.set(status, (attributes = { 'http.request.method': method, 'http.route': route, 'http.response.status_code': status }));
    this.duration.record(seconds, attributes);
    if (status === 429)
      this.refusals.add(
        1,
        this.routes.get(route, () => ({ 'http.route': route })),
      );
  }
}
