import { EntitySchema } from '@mikro-orm/core';

export interface Workspace {
  id: string;
  name: string;
  /** A plan id of domain/plans.ts (`free`, `pro`, `team`). */
  plan: string;
  /** Made at sign-up for its owner. */
  personal: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export const WorkspaceEntity = new EntitySchema<Workspace>({
  name: 'Workspace',
  tableName: 'workspaces',
  properties: {
    id: { type: 'string', primary: true },
    name: { type: 'string' },
    plan: { type: 'string', default: 'free' },
    personal: { type: 'boolean', default: false },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
  },
});
