import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import { startPeriodicJob, type PeriodicJob } from '../../runtime/periodic-job.ts';
import type { Database } from '../../persistence/database.ts';
import { deleteExpiredSessions } from '../../persistence/stores/identity.ts';

/** How often expired sessions are purged. */
export const SESSION_PURGE_INTERVAL_MS = 10 * 60_000;
/** Sessions deleted per statement. */
export const SESSION_PURGE_PAGE = 5_000;

/**
 * Deletes the sessions that expired before `now`, a page at a time until none is left. An expired
 * session is refused and deleted when its cookie comes back (http/auth/sessions.ts); one whose cookie
 * never comes back went nowhere before, and its row (token hash, IP, user agent) stayed for good. Rows
 * another node is deleting at the same moment are skipped, not waited for, so the nodes of a cluster
 * may all run it. Returns how many went.
 */
export async function purgeExpiredSessions(db: Database, now: number, page = SESSION_PURGE_PAGE): Promise<number> {
  return deleteExpiredSessions(db, new Date(now), page);
}

/** Runs purgeExpiredSessions every SESSION_PURGE_INTERVAL_MS on the service clock. */
export function startSessionPurge(db: Database, clock: Clock, logger: Logger): PeriodicJob {
  return startPeriodicJob(clock, logger, 'session purge', SESSION_PURGE_INTERVAL_MS, async () => {
    const purged = await purgeExpiredSessions(db, clock.now());
    if (purged > 0) logger.info({ purged }, 'expired sessions purged');
  });
}
