export * from './members.ts';
export * from './leases.ts';
export * from './fence.ts';
export * from './shard-sql.ts';
