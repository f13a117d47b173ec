import { ActorSnapshotEntity } from './actor-snapshot.ts';

/** Every entity the ORM knows; each issue adds its own here. */
export const entities = [ActorSnapshotEntity];
