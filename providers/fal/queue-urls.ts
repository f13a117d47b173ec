/**
 * fal's queue addresses (https://docs.fal.ai/model-endpoints/queue). A job is submitted to the full endpoint
 * id (`owner/app/subpath`), but its status, result and cancel live under the app alone
 * (`{queue}/owner/app/requests/{id}/status`): the subpath is dropped. Ids of the `workflows` and `comfy`
 * namespaces carry one more leading segment (as @fal-ai/client's parseEndpointId reads them).
 */
const NAMESPACES = ['workflows', 'comfy'];
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

export interface EndpointId {
  /** `owner/app` (or `namespace/owner/app`): what status, result and cancel URLs use. */
  app: string;
  /** What follows the app, e.g. `dev` of `fal-ai/flux/dev`; empty when none. */
  subpath: string;
}

/** Splits an endpoint id; undefined when it is not `owner/app[/subpath...]` of plain path segments. */
export function parseEndpointId(id: string): EndpointId | undefined {
  const parts = id.split('/');
  if (parts.some((part) => !SEGMENT.test(part))) return undefined;
  const appLength = NAMESPACES.includes(parts[0]!) ? 3 : 2;
  if (parts.length < appLength) return undefined;
  return { app: parts.slice(0, appLength).join('/'), subpath: parts.slice(appLength).join('/') };
}

export interface QueueUrls {
  status: string;
  response: string;
  cancel: string;
}

/** The documented URLs of a request, rebuilt from the app and the request id (what resume has). */
export function queueUrls(queueUrl: string, app: string, requestId: string): QueueUrls {
  const response = `${queueUrl}/${app}/requests/${encodeURIComponent(requestId)}`;
  return { status: `${response}/status`, response, cancel: `${response}/cancel` };
}

/**
 * Our provider job id: the app and fal's request id, which is all that status, result and cancel need
 * (`fal-ai/flux:764cabcf-...`). The app never holds a colon.
 */
export function providerJobIdOf(app: string, requestId: string): string {
  return `${app}:${requestId}`;
}

export function parseProviderJobId(providerJobId: string): { app: string; requestId: string } | undefined {
  const at = providerJobId.lastIndexOf(':');
  if (at <= 0) return undefined;
  const app = providerJobId.slice(0, at);
  const requestId = providerJobId.slice(at + 1);
  const endpoint = parseEndpointId(app);
  if (endpoint?.subpath !== '' || !/^[A-Za-z0-9_-]{1,128}$/.test(requestId)) return undefined;
  return { app, requestId };
}

/**
 * A URL fal answered with, when it points at the configured queue (same origin): the key is sent there, so
 * a URL elsewhere is never followed and the documented one is used instead.
 */
export function answeredUrl(answered: unknown, queueUrl: string, fallback: string): string {
  if (typeof answered !== 'string') return fallback;
  try {
    return new URL(answered).origin === new URL(queueUrl).origin ? answered : fallback;
  } catch {
    return fallback;
  }
}
