import { runThisGroup } from './run-group.ts';

await runThisGroup(import.meta.url);
