import t from 'tap';
import { loadConfig } from '../../runtime/config.ts';

/** domain/plans.ts: the settings that override a plan's per-key limit (REQUESTS_PER_MINUTE_ENV), as runtime/config.ts reads them. */

t.test('RATE_LIMIT_FREE, RATE_LIMIT_PRO and RATE_LIMIT_TEAM override the per-key limit of the plan of that id', async (t) => {
  t.same(loadConfig({}).rateLimitOverrides, {}, 'none set: no override');
  t.same(loadConfig({ RATE_LIMIT_FREE: '7', RATE_LIMIT_PRO: '8', RATE_LIMIT_TEAM: '9' }).rateLimitOverrides, { free: 7, pro: 8, team: 9 });
  t.same(loadConfig({ RATE_LIMIT_PRO: '120' }).rateLimitOverrides, { pro: 120 }, 'each on its own');
});
