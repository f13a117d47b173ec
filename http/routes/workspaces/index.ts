import type { RouteDef } from '../../route.ts';
import { listWorkspaces } from './list.ts';
import { createWorkspace } from './create.ts';
import { getWorkspace } from './get.ts';
import { updateWorkspace } from './update.ts';
import { deleteWorkspace } from './delete.ts';
import { listMembers } from './members-list.ts';
import { updateMember } from './members-update.ts';
import { removeMember } from './members-remove.ts';
import { transferOwnership } from './transfer.ts';
import { leaveWorkspace } from './leave.ts';
import { createInvitation } from './invitations-create.ts';
import { listInvitations } from './invitations-list.ts';
import { cancelInvitation } from './invitations-cancel.ts';
import { acceptInvitation } from '../invitations/accept.ts';

/** Workspaces, members and invitations (docs/auth-and-keys.md). */
export const workspaceRoutes: RouteDef[] = [
  listWorkspaces,
  createWorkspace,
  getWorkspace,
  updateWorkspace,
  deleteWorkspace,
  listMembers,
  updateMember,
  removeMember,
  transferOwnership,
  leaveWorkspace,
  createInvitation,
  listInvitations,
  cancelInvitation,
  acceptInvitation,
];
