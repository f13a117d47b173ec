import { EntitySchema } from '@mikro-orm/core';

export const ROLES = ['owner', 'admin', 'member'] as const;
export type Role = (typeof ROLES)[number];

export interface WorkspaceMember {
  workspaceId: string;
  userId: string;
  role: Role;
  createdAt: Date;
}

export const WorkspaceMemberEntity = new EntitySchema<WorkspaceMember>({
  name: 'WorkspaceMember',
  tableName: 'workspace_members',
  properties: {
    workspaceId: { type: 'string', fieldName: 'workspace_id', primary: true },
    userId: { type: 'string', fieldName: 'user_id', primary: true },
    role: { type: 'string' },
    createdAt: { type: 'Date', fieldName: 'created_at' },
  },
});
