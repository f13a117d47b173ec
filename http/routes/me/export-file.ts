import fs from 'node:fs/promises';
import path from 'node:path';
import { readUserData } from '../../../persistence/stores/identity.ts';
import type { Unit } from '../../../persistence/stores/unit.ts';

export const EXPORT_FORMAT = 'generation-service-export/1';
export const EXPORTS_DIR = 'exports';

const iso = (date: Date | null) => (date ? date.toISOString() : null);

/**
 * Everything the service holds about a user, as one JSON document: profile, memberships, linked
 * sign-in methods, sessions, invitations sent and API keys made. Written field by field, never from
 * whole rows, so secrets (password hash, session and key hashes, invitation tokens) can never slip in.
 */
export async function buildExport(unit: Unit, userId: string, exportedAt: number): Promise<Record<string, unknown>> {
  const data = await readUserData(unit, userId);
  const { user, memberships, linked, sessions, invitations, keys, exports } = data;
  const workspaces = new Map(data.workspaces.map((w) => [w.id, w]));
  return {
    format: EXPORT_FORMAT,
    exportedAt: new Date(exportedAt).toISOString(),
    user: {
      id: user.id,
      email: user.email,
      name: user.name,
      hasPassword: user.passwordHash !== null,
      createdAt: iso(user.createdAt),
      updatedAt: iso(user.updatedAt),
    },
    memberships: memberships.map((m) => ({
      workspaceId: m.workspaceId,
      workspaceName: workspaces.get(m.workspaceId)?.name ?? null,
      role: m.role,
      joinedAt: iso(m.createdAt),
    })),
    linkedAccounts: linked.map((a) => ({ provider: a.provider, providerAccountId: a.providerAccountId, createdAt: iso(a.createdAt) })),
    sessions: sessions.map((s) => ({
      id: s.id,
      createdAt: iso(s.createdAt),
      expiresAt: iso(s.expiresAt),
      lastSeenAt: iso(s.lastSeenAt),
      ip: s.ip,
      userAgent: s.userAgent,
    })),
    invitationsSent: invitations.map((i) => ({
      id: i.id,
      workspaceId: i.workspaceId,
      email: i.email,
      role: i.role,
      status: i.status,
      createdAt: iso(i.createdAt),
      expiresAt: iso(i.expiresAt),
    })),
    apiKeysCreated: keys.map((k) => ({
      id: k.id,
      workspaceId: k.workspaceId,
      name: k.name,
      prefix: k.prefix,
      scopes: k.scopes,
      createdAt: iso(k.createdAt),
      expiresAt: iso(k.expiresAt),
      revokedAt: iso(k.revokedAt),
    })),
    earlierExports: exports.map((e) => ({ id: e.id, status: e.status, createdAt: iso(e.createdAt), completedAt: iso(e.completedAt) })),
  };
}

/** Writes the file under dataDir and makes it durable (temp file, fsync, rename); returns its path relative to dataDir. */
export async function writeExportFile(dataDir: string, exportId: string, text: string): Promise<string> {
  const relative = path.join(EXPORTS_DIR, `${exportId}.json`);
  const dir = path.join(dataDir, EXPORTS_DIR);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const target = path.join(dataDir, relative);
  const temp = `${target}.tmp`;
  const handle = await fs.open(temp, 'w', 0o600);
  try {
    await handle.writeFile(text, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(temp, target);
  return relative;
}

/** The absolute path of a stored export; refuses anything that would leave the exports directory. */
export function exportFilePath(dataDir: string, relative: string): string {
  const root = path.resolve(dataDir, EXPORTS_DIR);
  const absolute = path.resolve(dataDir, relative);
  if (path.dirname(absolute) !== root) throw new Error(`export path ${relative} is outside ${root}`);
  return absolute;
}

/** Removes export files; a file already gone is fine. */
export async function removeExportFiles(dataDir: string, relatives: string[]): Promise<void> {
  await Promise.all(
    relatives.map(async (relative) => {
      await fs.rm(exportFilePath(dataDir, relative), { force: true });
    }),
  );
}
