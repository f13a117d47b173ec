/**
 * The statements of people: users, their sign-in methods (linked accounts), their sessions and their data
 * exports.
 */
import { LockMode } from '@mikro-orm/core';
import { ApiKeyEntity, type ApiKey } from '../entities/api-key.ts';
import { ExportRequestEntity, type ExportRequest } from '../entities/export-request.ts';
import { InvitationEntity, type Invitation } from '../entities/invitation.ts';
import { LinkedAccountEntity, type LinkedAccount } from '../entities/linked-account.ts';
import { SessionEntity, type Session } from '../entities/session.ts';
import { UserEntity, type User } from '../entities/user.ts';
import { WorkspaceEntity, type Workspace } from '../entities/workspace.ts';
import { WorkspaceMemberEntity, type WorkspaceMember } from '../entities/workspace-member.ts';
import type { Database } from '../database.ts';
import { deleteInPages } from '../paged-delete.ts';
import { emOf } from './orm.ts';
import type { Unit } from './unit.ts';

export type { ExportRequest, ExportStatus } from '../entities/export-request.ts';
export type { LinkedAccount } from '../entities/linked-account.ts';
export type { Session } from '../entities/session.ts';
export type { User } from '../entities/user.ts';

// Users.

export function findUserByEmail(unit: Unit, email: string): Promise<User | null> {
  return emOf(unit).findOne(UserEntity, { email });
}

/** A user who must exist (the caller of a session); with `lock` (in a transaction) taken FOR UPDATE. */
export function findUserOrFail(unit: Unit, id: string, options: { lock?: boolean } = {}): Promise<User> {
  return options.lock ? emOf(unit).findOneOrFail(UserEntity, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE }) : emOf(unit).findOneOrFail(UserEntity, { id });
}

/** The users of these ids (those that exist). */
export function findUsers(unit: Unit, ids: string[]): Promise<User[]> {
  return emOf(unit).find(UserEntity, { id: { $in: ids } });
}

/** A new user signing up with a password, their personal workspace and their ownership of it, in one transaction. */
export async function insertSignup(unit: Unit, user: User, workspace: Workspace, owner: WorkspaceMember): Promise<void> {
  await emOf(unit).transactional(async (tx) => {
    await tx.insert(UserEntity, user);
    await tx.insert(LinkedAccountEntity, { userId: user.id, provider: 'password', providerAccountId: user.id, createdAt: user.createdAt });
    await tx.insert(WorkspaceEntity, workspace);
    await tx.insert(WorkspaceMemberEntity, owner);
  });
}

/** A user's password hash, stronger (the same password hashed again with today's parameters). */
export async function rehashPassword(unit: Unit, id: string, passwordHash: string): Promise<void> {
  await emOf(unit).nativeUpdate(UserEntity, { id }, { passwordHash });
}

/** Replaces a user's password hash only if it is still `current`; false when it changed meanwhile. */
export async function replacePassword(unit: Unit, id: string, current: string, passwordHash: string, at: Date): Promise<boolean> {
  return (await emOf(unit).nativeUpdate(UserEntity, { id, passwordHash: current }, { passwordHash, updatedAt: at })) > 0;
}

/** A user's name or e-mail address. */
export async function updateUserRow(unit: Unit, id: string, changes: { name?: string; email?: string; updatedAt: Date }): Promise<void> {
  await emOf(unit).nativeUpdate(UserEntity, { id }, changes);
}

/** Deletes a user; their sessions, linked accounts, memberships and export records go with them (ON DELETE CASCADE). */
export async function deleteUserRow(unit: Unit, id: string): Promise<void> {
  await emOf(unit).nativeDelete(UserEntity, { id });
}

/** The workspaces a user owns, by id. */
export function ownedMemberships(unit: Unit, userId: string): Promise<WorkspaceMember[]> {
  return emOf(unit).find(WorkspaceMemberEntity, { userId, role: 'owner' }, { orderBy: { workspaceId: 'asc' } });
}

/** How many members of a workspace are not this user. */
export function countOtherMembers(unit: Unit, workspaceId: string, userId: string): Promise<number> {
  return emOf(unit).count(WorkspaceMemberEntity, { workspaceId, userId: { $ne: userId } });
}

// Linked accounts.

/** A user's sign-in methods, newest first. */
export function listLinkedAccounts(unit: Unit, userId: string): Promise<LinkedAccount[]> {
  return emOf(unit).find(LinkedAccountEntity, { userId }, { orderBy: { createdAt: 'desc', provider: 'asc' } });
}

/** A user's sign-in methods, in no order. */
export function linkedAccountsOf(unit: Unit, userId: string): Promise<LinkedAccount[]> {
  return emOf(unit).find(LinkedAccountEntity, { userId });
}

export async function deleteLinkedAccount(unit: Unit, userId: string, provider: string): Promise<void> {
  await emOf(unit).nativeDelete(LinkedAccountEntity, { userId, provider });
}

/** Drops a user's password (the password method unlinked). */
export async function clearPassword(unit: Unit, id: string, at: Date): Promise<void> {
  await emOf(unit).nativeUpdate(UserEntity, { id }, { passwordHash: null, updatedAt: at });
}

// Sessions.

export async function insertSession(unit: Unit, session: Session): Promise<void> {
  await emOf(unit).insert(SessionEntity, session);
}

export function findSessionByToken(unit: Unit, tokenHash: string): Promise<Session | null> {
  return emOf(unit).findOne(SessionEntity, { tokenHash });
}

export async function deleteSession(unit: Unit, id: string): Promise<void> {
  await emOf(unit).nativeDelete(SessionEntity, { id });
}

/** Ends every session of a user but `keep`. */
export async function deleteOtherSessions(unit: Unit, userId: string, keep: string): Promise<void> {
  await emOf(unit).nativeDelete(SessionEntity, { userId, id: { $ne: keep } });
}

/**
 * Deletes the sessions that expired before `before`, `page` at a time until none is left, skipping rows
 * another node is deleting; how many went.
 */
export function deleteExpiredSessions(db: Database, before: Date, page: number): Promise<number> {
  return deleteInPages(
    db,
    'delete from sessions where id in (select id from sessions where expires_at < ? order by expires_at limit ? for update skip locked) returning id',
    [before],
    page,
  );
}

// Exports.

export function findExport(unit: Unit, userId: string, id: string): Promise<ExportRequest | null> {
  return emOf(unit).findOne(ExportRequestEntity, { id, userId });
}

export async function insertExport(unit: Unit, request: ExportRequest): Promise<void> {
  await emOf(unit).insert(ExportRequestEntity, request);
}

/** A user's export records, in no order. */
export function exportsOf(unit: Unit, userId: string): Promise<ExportRequest[]> {
  return emOf(unit).find(ExportRequestEntity, { userId });
}

/** Everything the service holds about a user, as rows, for their data export. */
export interface UserData {
  user: User;
  memberships: WorkspaceMember[];
  workspaces: Workspace[];
  linked: LinkedAccount[];
  sessions: Session[];
  invitations: Invitation[];
  keys: ApiKey[];
  exports: ExportRequest[];
}

export async function readUserData(unit: Unit, userId: string): Promise<UserData> {
  const em = emOf(unit);
  const user = await em.findOneOrFail(UserEntity, { id: userId });
  const memberships = await em.find(WorkspaceMemberEntity, { userId }, { orderBy: { workspaceId: 'asc' } });
  const workspaces = await em.find(WorkspaceEntity, { id: { $in: memberships.map((m) => m.workspaceId) } });
  const linked = await em.find(LinkedAccountEntity, { userId }, { orderBy: { provider: 'asc' } });
  const sessions = await em.find(SessionEntity, { userId }, { orderBy: { createdAt: 'asc' } });
  const invitations = await em.find(InvitationEntity, { invitedBy: userId }, { orderBy: { id: 'asc' } });
  const keys = await em.find(ApiKeyEntity, { createdBy: userId }, { orderBy: { id: 'asc' } });
  const exports = await em.find(ExportRequestEntity, { userId }, { orderBy: { id: 'asc' } });
  return { user, memberships, workspaces, linked, sessions, invitations, keys, exports };
}
