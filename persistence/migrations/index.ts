import { Migration0001Foundation } from './0001-foundation.ts';

/** Applied in this order at start-up; a migration, once landed, is never edited, only followed. */
export const migrations = [
  { name: '0001-foundation', class: Migration0001Foundation },
];
