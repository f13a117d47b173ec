import { ApiError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import { findKey, type ApiKey } from '../../../persistence/stores/keys.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';
import type { KeyLimitsPatch } from './shapes.ts';
import { MANAGERS, openWorkspace, requireRole, requireSession } from '../workspaces/access.ts';

/** The workspace whose keys the caller manages: a member who is its owner or an admin (404 for strangers, 403 for members). */
export async function openKeyWorkspace(unit: Unit, auth: Principal | undefined, workspaceId: string): Promise<void> {
  requireSession(auth, 'manage API keys');
  const access = await openWorkspace(unit, auth, workspaceId);
  requireRole(access, MANAGERS, 'manage API keys');
}

/**
 * A key the caller may manage; a key of a workspace the caller is not in, or of another workspace than
 * the one the request names, answers exactly as a missing one (404).
 */
export async function openKey(unit: Unit, auth: Principal | undefined, id: string, workspaceId?: unknown): Promise<ApiKey> {
  requireSession(auth, 'manage API keys');
  const key = await findKey(unit, id);
  if (!key || (workspaceId !== undefined && key.workspaceId !== workspaceId)) throw new ApiError('not_found', `No API key ${id}.`);
  try {
    await openKeyWorkspace(unit, auth, key.workspaceId);
  } catch (error) {
    if (error instanceof ApiError && error.code === 'not_found') throw new ApiError('not_found', `No API key ${id}.`);
    throw error;
  }
  return key;
}

/** An expiry must lie ahead of now. */
export function checkExpiry(expiresAt: string | null | undefined, now: number): Date | null | undefined {
  if (expiresAt === undefined || expiresAt === null) return expiresAt;
  const at = new Date(expiresAt);
  if (Number.isNaN(at.getTime())) throw new ApiError('validation_error', 'body.expiresAt: must be a date-time');
  if (at.getTime() <= now) throw new ApiError('validation_error', 'body.expiresAt: must be in the future');
  return at;
}

/** The models of an allowlist must be models of the catalog (GET /v1/models). */
export function checkAllowedModels(catalog: { get(id: string): unknown }, limits: KeyLimitsPatch | undefined): void {
  const models = limits?.allowedModels;
  if (!models) return;
  models.forEach((id, i) => {
    if (!catalog.get(id)) throw new ApiError('validation_error', `body.limits.allowedModels.${i}: unknown model "${id}"; see GET /v1/models`);
  });
}
