import { EntitySchema } from '@mikro-orm/core';

/** The last persisted state of an actor whose state is not a row of its own domain table. */
export interface ActorSnapshot {
  kind: string;
  id: string;
  version: number;
  state: unknown;
  updatedAt: Date;
}

export const ActorSnapshotEntity = new EntitySchema<ActorSnapshot>({
  name: 'ActorSnapshot',
  tableName: 'actor_snapshots',
  properties: {
    kind: { type: 'string', primary: true },
    id: { type: 'string', primary: true },
    version: { type: 'integer' },
    state: { type: 'json' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
  },
});
