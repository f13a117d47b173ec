import type { SqlEntityManager } from '@mikro-orm/postgresql';

/**
 * Closes the race between an endpoint's creation and an event: a transaction that writes an event's
 * deliveries first takes its workspaces' rows FOR SHARE, in a statement of its own, before it reads
 * the subscribed endpoints. Creation holds the same row FOR UPDATE until it commits
 * (http/routes/webhooks/create.ts), so either the creation committed before this statement (and the reads
 * after it, each with a fresh snapshot, see the endpoint: it gets the event), or it waits for the event's
 * commit (and the endpoint only gets later events). Without it, an endpoint committed between the count of
 * subscribed endpoints and the INSERT of their deliveries was silently left out. Rows in id order, so two
 * such transactions never wait on each other in a cycle (FOR SHARE never conflicts with FOR SHARE anyway).
 */
export async function holdSubscriptions(em: SqlEntityManager, workspaceIds: Iterable<string>): Promise<void> {
  const ids = [...new Set(workspaceIds)];
  if (ids.length === 0) return;
  await em.execute('select id from workspaces where id in (select value from jsonb_array_elements_text(?::jsonb)) order by id for share', [
    JSON.stringify(ids),
  ]);
}
