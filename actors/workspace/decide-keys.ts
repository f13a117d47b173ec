/**
 * A workspace's API keys' spending controls, as pure decisions (decision.ts): this actor decides every create
 * of the workspace, so a change applied here is in force for the next create, and none is decided against the
 * old limits.
 */
import { keyLimitsUsage, patchKeyLimits, type KeyLimitsPatch, type KeySpend } from '../../domain/key-limits.ts';
import type { Decision } from './decision.ts';
import type { KeyLimitsReply, KeyUsageReply } from './protocol.ts';
import type { WorkspaceState } from './state.ts';

/** Keeps the limits and spend of keys the actor read (those it had not seen yet): every change of their spend passes through it from now on. */
export function rememberKeys(state: WorkspaceState, read: ReadonlyMap<string, KeySpend> | undefined): void {
  if (!read) return;
  for (const [id, key] of read) if (!state.keys.has(id)) state.keys.set(id, key);
}

/** `key_limits`: the key's controls changed, written to its row, and answered with them once committed. */
export function decideKeyLimits<S extends WorkspaceState>(
  state: S,
  keyId: string,
  patch: KeyLimitsPatch,
  read: ReadonlyMap<string, KeySpend> | undefined,
  now: number,
): Decision<S, KeyLimitsReply> {
  rememberKeys(state, read);
  const key = state.keys.get(keyId);
  if (!key) return { state, reply: { found: false }, effects: [] };
  const limits = patchKeyLimits(key.limits, patch);
  key.limits = limits;
  return { state, reply: { found: true, limits }, effects: [{ type: 'write_key_limits', keyId, limits, at: now }] };
}

/** `key_usage`: the key's limits and what it spent, as of now. */
export function decideKeyUsage<S extends WorkspaceState>(
  state: S,
  keyId: string,
  read: ReadonlyMap<string, KeySpend> | undefined,
  now: number,
): Decision<S, KeyUsageReply> {
  rememberKeys(state, read);
  const key = state.keys.get(keyId);
  return { state, reply: key ? { found: true, usage: keyLimitsUsage(key, now) } : { found: false }, effects: [] };
}
