import { emOf } from './orm.ts';
import type { Unit } from './unit.ts';

/** The service's public figures: generations made and succeeded, and workspaces, over every workspace. */
export async function serviceCounts(unit: Unit): Promise<{ generations: number; succeeded: number; workspaces: number }> {
  const em = emOf(unit);
  const [generations] = await em.execute<Array<{ total: string | number; succeeded: string | number }>>(
    `select count(*) as total, count(*) filter (where status = 'succeeded') as succeeded from generations`,
  );
  const [workspaces] = await em.execute<Array<{ total: string | number }>>('select count(*) as total from workspaces');
  return { generations: Number(generations?.total ?? 0), succeeded: Number(generations?.succeeded ?? 0), workspaces: Number(workspaces?.total ?? 0) };
}
