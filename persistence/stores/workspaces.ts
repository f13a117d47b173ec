/**
 * The statements of workspaces and their people: the workspace row, its members and its invitations, and
 * the deletion of a workspace with everything under it.
 */
import { LockMode, UniqueConstraintViolationException } from '@mikro-orm/core';
import { TERMINAL_STATUSES } from '../../domain/generation-status.ts';
import { ApiKeyEntity } from '../entities/api-key.ts';
import { AssetEntity } from '../entities/asset.ts';
import { GenerationEntity } from '../entities/generation.ts';
import { InvitationEntity, type Invitation } from '../entities/invitation.ts';
import { UploadEntity } from '../entities/upload.ts';
import { WorkspaceEntity, type Workspace } from '../entities/workspace.ts';
import { WorkspaceMemberEntity, type Role, type WorkspaceMember } from '../entities/workspace-member.ts';
import { emOf } from './orm.ts';
import type { Unit } from './unit.ts';

export type { Invitation, InvitationRole, InvitationStatus } from '../entities/invitation.ts';
export { INVITATION_ROLES } from '../entities/invitation.ts';
export type { Workspace } from '../entities/workspace.ts';
export type { Role, WorkspaceMember } from '../entities/workspace-member.ts';
export { ROLES } from '../entities/workspace-member.ts';

/** Whether an error is a unique constraint's refusal (a row that is already there). */
export function isUniqueViolation(error: unknown): boolean {
  return error instanceof UniqueConstraintViolationException;
}

/** A workspace by id; with `lock` (in a transaction) taken FOR UPDATE. */
export function findWorkspace(unit: Unit, id: string, options: { lock?: boolean } = {}): Promise<Workspace | null> {
  return emOf(unit).findOne(WorkspaceEntity, { id }, options.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
}

/** A user's membership of a workspace; `refresh` reads it again even when this unit already holds it. */
export function findMember(unit: Unit, workspaceId: string, userId: string, options: { refresh?: boolean } = {}): Promise<WorkspaceMember | null> {
  return options.refresh
    ? emOf(unit).findOne(WorkspaceMemberEntity, { workspaceId, userId }, { refresh: true })
    : emOf(unit).findOne(WorkspaceMemberEntity, { workspaceId, userId });
}

/** Whether a user is a member of a workspace. */
export async function isMember(unit: Unit, workspaceId: string, userId: string): Promise<boolean> {
  return (await emOf(unit).count(WorkspaceMemberEntity, { workspaceId, userId })) > 0;
}

/** A new workspace and its owner, in one transaction. */
export async function insertWorkspace(unit: Unit, workspace: Workspace, ownerId: string): Promise<void> {
  await emOf(unit).transactional(async (tx) => {
    await tx.insert(WorkspaceEntity, workspace);
    await tx.insert(WorkspaceMemberEntity, { workspaceId: workspace.id, userId: ownerId, role: 'owner' as const, createdAt: workspace.createdAt });
  });
}

/** A workspace's name and when it changed. */
export async function updateWorkspaceRow(unit: Unit, id: string, changes: Pick<Workspace, 'name' | 'updatedAt'>): Promise<void> {
  await emOf(unit).nativeUpdate(WorkspaceEntity, { id }, changes);
}

/** Marks a workspace changed (its people changed). */
export async function touchWorkspace(unit: Unit, id: string, updatedAt: Date): Promise<void> {
  await emOf(unit).nativeUpdate(WorkspaceEntity, { id }, { updatedAt });
}

/**
 * A page of a user's memberships, newest workspace first (workspace ids sort by creation): those before
 * `after`, only `only` when given.
 */
export function listMemberships(unit: Unit, userId: string, page: { after?: string; only?: string; limit: number }): Promise<WorkspaceMember[]> {
  return emOf(unit).find(
    WorkspaceMemberEntity,
    {
      $and: [
        { userId },
        ...(page.after === undefined ? [] : [{ workspaceId: { $lt: page.after } }]),
        ...(page.only === undefined ? [] : [{ workspaceId: page.only }]),
      ],
    },
    { orderBy: { workspaceId: 'desc' }, limit: page.limit },
  );
}

/** The workspaces of these ids (those that exist). */
export function findWorkspaces(unit: Unit, ids: string[]): Promise<Workspace[]> {
  return emOf(unit).find(WorkspaceEntity, { id: { $in: ids } });
}

/** A page of a workspace's members, newest first, after the `(createdAt, userId)` of the page before. */
export function listMembers(unit: Unit, workspaceId: string, page: { after?: [at: Date, userId: string]; limit: number }): Promise<WorkspaceMember[]> {
  const after = page.after;
  return emOf(unit).find(
    WorkspaceMemberEntity,
    {
      workspaceId,
      ...(after === undefined ? {} : { $or: [{ createdAt: { $lt: after[0] } }, { createdAt: after[0], userId: { $lt: after[1] } }] }),
    },
    { orderBy: [{ createdAt: 'desc' }, { userId: 'desc' }], limit: page.limit },
  );
}

export async function insertMember(unit: Unit, member: WorkspaceMember): Promise<void> {
  await emOf(unit).insert(WorkspaceMemberEntity, member);
}

export async function setMemberRole(unit: Unit, workspaceId: string, userId: string, role: Role): Promise<void> {
  await emOf(unit).nativeUpdate(WorkspaceMemberEntity, { workspaceId, userId }, { role });
}

export async function deleteMember(unit: Unit, workspaceId: string, userId: string): Promise<void> {
  await emOf(unit).nativeDelete(WorkspaceMemberEntity, { workspaceId, userId });
}

/** A user's memberships in every workspace. */
export function membershipsOf(unit: Unit, userId: string): Promise<WorkspaceMember[]> {
  return emOf(unit).find(WorkspaceMemberEntity, { userId });
}

/** How many members a workspace has. */
export function countMembers(unit: Unit, workspaceId: string): Promise<number> {
  return emOf(unit).count(WorkspaceMemberEntity, { workspaceId });
}

// Invitations.

export function findInvitation(unit: Unit, workspaceId: string, id: string): Promise<Invitation | null> {
  return emOf(unit).findOne(InvitationEntity, { id, workspaceId });
}

export function findInvitationByToken(unit: Unit, tokenHash: string): Promise<Invitation | null> {
  return emOf(unit).findOne(InvitationEntity, { tokenHash });
}

/** An invitation read again, past what this unit already holds. */
export function refreshInvitation(unit: Unit, id: string): Promise<Invitation | null> {
  return emOf(unit).findOne(InvitationEntity, { id }, { refresh: true });
}

/** The pending invitation of an address to a workspace. */
export function findPendingInvitation(unit: Unit, workspaceId: string, email: string): Promise<Invitation | null> {
  return emOf(unit).findOne(InvitationEntity, { workspaceId, email, status: 'pending' });
}

/** Cancels a pending invitation (it stays cancelled if it was no longer pending). */
export async function cancelPendingInvitation(unit: Unit, id: string): Promise<void> {
  await emOf(unit).nativeUpdate(InvitationEntity, { id, status: 'pending' }, { status: 'cancelled' });
}

/** Retires an invitation, whatever its state (an expired one still holding the address's pending slot). */
export async function retireInvitation(unit: Unit, id: string): Promise<void> {
  await emOf(unit).nativeUpdate(InvitationEntity, { id }, { status: 'cancelled' });
}

export async function insertInvitation(unit: Unit, invitation: Invitation): Promise<void> {
  await emOf(unit).insert(InvitationEntity, invitation);
}

export async function markInvitationAccepted(unit: Unit, id: string, at: Date, userId: string): Promise<void> {
  await emOf(unit).nativeUpdate(InvitationEntity, { id }, { status: 'accepted', acceptedAt: at, acceptedBy: userId });
}

/** A page of a workspace's pending invitations not yet expired at `now`, newest first, before id `after`. */
export function listPendingInvitations(unit: Unit, workspaceId: string, now: Date, page: { after?: string; limit: number }): Promise<Invitation[]> {
  return emOf(unit).find(
    InvitationEntity,
    { workspaceId, status: 'pending', expiresAt: { $gt: now }, ...(page.after === undefined ? {} : { id: { $lt: page.after } }) },
    { orderBy: { id: 'desc' }, limit: page.limit },
  );
}

// Deletion.

/** How many generations of a workspace are not finished (queued, reserved, submitted or running). */
export function countUnfinishedGenerations(unit: Unit, workspaceId: string): Promise<number> {
  return emOf(unit).count(GenerationEntity, { workspaceId, status: { $nin: [...TERMINAL_STATUSES] } });
}

/** What a workspace leaves outside the database, read before it is deleted. */
export interface WorkspaceLeftovers {
  keyHashes: string[];
  storageKeys: string[];
}

/** The key hashes and blob keys of a workspace's API keys, assets and uploads (each blob key once). */
export async function leftoversOf(unit: Unit, workspaceId: string): Promise<WorkspaceLeftovers> {
  const em = emOf(unit);
  const keys = await em.find(ApiKeyEntity, { workspaceId }, { fields: ['keyHash'] });
  const assets = await em.find(AssetEntity, { workspaceId }, { fields: ['storageKey'] });
  const uploads = await em.find(UploadEntity, { workspaceId }, { fields: ['storageKey'] });
  return {
    keyHashes: keys.map((key) => key.keyHash),
    // An asset made from an upload keeps the upload's key: each object once.
    storageKeys: [...new Set([...assets, ...uploads].map((row) => row.storageKey))],
  };
}

/** Deletes a workspace; the schema's ON DELETE CASCADE takes its members, keys, generations, assets and the rest. */
export async function deleteWorkspaceRow(unit: Unit, id: string): Promise<void> {
  await emOf(unit).nativeDelete(WorkspaceEntity, { id });
}
