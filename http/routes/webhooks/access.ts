import dns from 'node:dns/promises';
import { ApiError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import { checkUrlSyntax, policyOf, type AddressOptions } from '../../../runtime/egress.ts';
import { findLiveEndpointIn } from '../../../persistence/stores/webhooks/endpoints.ts';
import type { WebhookEndpointRow } from '../../../persistence/stores/webhooks/rows.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';
import { MANAGERS, openWorkspace, requireRole, type WorkspaceAccess } from '../workspaces/access.ts';

/**
 * The workspace whose webhooks the caller manages: a key of that workspace with webhooks.manage (the scope
 * is checked by the router), or a member who is its owner or an admin (404 for strangers, 403 for members).
 */
export async function openWebhookWorkspace(
  unit: Unit,
  auth: Principal | undefined,
  workspaceId: string | undefined,
  options: { lock?: boolean } = {},
): Promise<WorkspaceAccess> {
  if (!auth) throw new ApiError('unauthenticated');
  const id = workspaceId ?? (auth.kind === 'key' ? auth.workspaceId : undefined);
  if (id === undefined) throw new ApiError('validation_error', 'workspaceId: is required when signed in (an API key implies its workspace)');
  const access = await openWorkspace(unit, auth, id, options);
  if (auth.kind === 'session') requireRole(access, MANAGERS, 'manage webhooks');
  return access;
}

/** An endpoint the caller may manage; one of another workspace answers exactly as a missing one (404). */
export async function openEndpoint(unit: Unit, auth: Principal | undefined, id: string, workspaceId: string | undefined): Promise<WebhookEndpointRow> {
  const missing = () => new ApiError('not_found', `No webhook endpoint ${id}.`);
  const row = await findLiveEndpointIn(unit, id);
  if (!row || (workspaceId !== undefined && workspaceId !== row.workspaceId)) throw missing();
  if (auth?.kind === 'key' && auth.workspaceId !== row.workspaceId) throw missing();
  try {
    await openWebhookWorkspace(unit, auth, row.workspaceId);
  } catch (error) {
    if (error instanceof ApiError && error.code === 'not_found') throw missing();
    throw error;
  }
  return row;
}

/**
 * The egress guard at creation (docs/webhooks.md, Where deliveries may go): http(s), no credentials, and a host that
 * resolves to public addresses only, unless private egress is allowed. Each delivery checks again at
 * connect time, so a name that later points inward is still refused.
 */
export async function checkEndpointUrl(url: string, egress: AddressOptions): Promise<string> {
  const allowPrivate = egress.allowPrivate === true;
  const allowed = policyOf(egress);
  const checked = checkUrlSyntax(url, egress);
  if (!checked.ok) throw new ApiError('validation_error', `body.url: ${checked.reason}`);
  const host = checked.url.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate) {
    let addresses: Array<{ address: string }>;
    try {
      addresses = await dns.lookup(host, { all: true });
    } catch {
      throw new ApiError('validation_error', `body.url: the host ${host} cannot be resolved`);
    }
    const blocked = addresses.find((a) => !allowed(a.address));
    if (blocked || addresses.length === 0)
      throw new ApiError('validation_error', `body.url: ${host} resolves to ${blocked?.address ?? 'nothing'}, which is not a public address`);
  }
  return url;
}

/** Resend, recover and replay queue deliveries: a disabled endpoint would fail them at once, so they are refused (409). */
export function requireActive(endpoint: WebhookEndpointRow): void {
  if (endpoint.status !== 'active') {
    throw new ApiError(
      'conflict',
      `The endpoint ${endpoint.id} is disabled${endpoint.disabledReason ? ` (${endpoint.disabledReason})` : ''}; set its status to active first.`,
    );
  }
}
