/**
 * The statements of the operator's switches (runtime/switches.ts): one row of `service_switches` per switch.
 */
import type { Database } from '../database.ts';

export interface SwitchRow {
  enabled: boolean;
  reason: string | null;
  changed_at: Date | string;
}

/** A switch as stored; undefined when it was never set. */
export async function readSwitch(db: Database, name: string): Promise<SwitchRow | undefined> {
  const rows = await db.em().execute<SwitchRow[]>('select enabled, reason, changed_at from service_switches where name = ?', [name]);
  return rows[0];
}

/**
 * Sets a switch. Setting it to the value it has keeps its `changed_at` (and takes the new reason).
 */
export async function writeSwitch(db: Database, name: string, enabled: boolean, reason: string | null, at: Date): Promise<SwitchRow | undefined> {
  const rows = await db.em().execute<SwitchRow[]>(
    `insert into service_switches (name, enabled, reason, changed_at) values (?, ?, ?, ?)
       on conflict (name) do update set
         enabled = excluded.enabled,
         reason = excluded.reason,
         changed_at = case when service_switches.enabled = excluded.enabled then service_switches.changed_at else excluded.changed_at end
       returning enabled, reason, changed_at`,
    [name, enabled, reason, at],
  );
  return rows[0];
}
