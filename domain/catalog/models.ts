export { MODES, type Mode } from './modes.ts';
export type { ModelRecord, DeploymentRecord } from './build.ts';
