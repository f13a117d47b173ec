/** The key scopes; what each grants is in docs/auth-and-keys.md (Scopes). */
export const SCOPES = [
  'generations.write',
  'generations.read',
  'files.write',
  'assets.read',
  'usage.read',
  'wallet.read',
  'wallet.write',
  'webhooks.manage',
  'all',
] as const;
export type Scope = (typeof SCOPES)[number];

/** The authenticated caller of a request. */
export type Principal = { kind: 'session'; userId: string; sessionId: string } | { kind: 'key'; keyId: string; workspaceId: string; scopes: Scope[] };
