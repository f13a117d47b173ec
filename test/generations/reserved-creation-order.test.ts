import t, { type Test } from 'tap';
import pg from 'pg';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { cancelGeneration, createGeneration, eventually, getGeneration, tenant, type Tenant } from '../webhooks/support.ts';

/**
 * A job reserved in its creation's transaction may take the slot of a job whose settlement has not committed
 * yet: its creation then commits behind that settlement, so that no crash can leave both holding a slot past
 * the plan. Only then: a workspace within its plan even counting such slots as taken does not make its
 * creates wait on another job's settlement. The settlement is held by a lock on its job's row, taken from
 * another connection; PostgreSQL only (PGlite runs one transaction at a time).
 */
const ONLY_POSTGRES = { skip: process.env.TEST_DATABASE_URL ? false : 'PostgreSQL only (TEST_DATABASE_URL): PGlite runs one transaction at a time' };

/** Running half the latency in, done at the whole: the lock is taken between the two. */
const ENV = { LOCAL_PROVIDER_LATENCY_MS: '8000', RATE_LIMIT_FREE: '100000' };

/** Locks the rows of `ids` (running) from another connection, and waits until their settlements wait on the lock; `release` commits it. */
async function holdSettlements(t: Test, server: TestServer, who: Tenant, ids: string[]): Promise<{ release(): Promise<void> }> {
  for (const id of ids) await eventually(async () => ((await getGeneration(server, who, id)).status === 'running' ? true : undefined), `${id} running`);
  const side = new pg.Client({ connectionString: server.config.databaseUrl });
  await side.connect();
  await side.query('begin');
  await side.query('select id from generations where id = any($1::text[]) for update', [ids]);
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await side.query('commit');
    await side.end();
  };
  t.teardown(release);
  await eventually(async () => {
    const { rows } = await side.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`);
    return rows[0].n > 0 ? true : undefined;
  }, 'a settlement waits on the lock');
  return { release };
}

/** A create sent now, and whether it has been answered yet. */
function sentCreate(server: TestServer, who: Tenant) {
  let answered = false;
  const created = createGeneration(server, who, 'after').then((g) => {
    answered = true;
    return g;
  });
  return { created, answered: () => answered };
}

t.test('a create with a slot free, even counting slots of settlements not yet committed, does not wait on them', ONLY_POSTGRES, async (t) => {
  const server = await startTestServer(t, { env: ENV });
  const who = await tenant(server);
  const first = await createGeneration(server, who, 'first');
  const held = await holdSettlements(t, server, who, [first.id]);

  // Free plan: two slots. The first job's slot is freed in memory, its settlement held: one slot was free anyway.
  const next = sentCreate(server, who);
  const settledFirst = () => getGeneration(server, who, first.id).then((g) => g.status);
  let bound: NodeJS.Timeout | undefined;
  const answer = await Promise.race([
    next.created,
    new Promise<undefined>((resolve) => {
      bound = setTimeout(resolve, 30_000, undefined);
    }),
  ]);
  clearTimeout(bound);
  t.ok(answer, "the create was answered while the other job's settlement was still held");
  t.equal(await settledFirst(), 'running', 'that settlement had not committed');
  await held.release();
  await eventually(async () => ((await settledFirst()) === 'succeeded' ? true : undefined), 'the first job settled');
  // Its run is not needed: the server stops sooner without it.
  await cancelGeneration(server, who, (await next.created).id);
});

t.test('a create that may take a slot freed by a settlement not yet committed commits behind that settlement', ONLY_POSTGRES, async (t) => {
  const server = await startTestServer(t, { env: ENV });
  const who = await tenant(server);
  // Both slots of the free plan taken, both settlements held: the next job's slot is one of theirs.
  const jobs = [await createGeneration(server, who, 'one'), await createGeneration(server, who, 'two')];
  const held = await holdSettlements(
    t,
    server,
    who,
    jobs.map((j) => j.id),
  );

  const next = sentCreate(server, who);
  // Unordered, it would commit within milliseconds: give it far longer.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  t.notOk(next.answered(), 'not answered while the settlements whose slots it may take are held');
  t.same(
    (await Promise.all(jobs.map((j) => getGeneration(server, who, j.id)))).map((g) => g.status),
    ['running', 'running'],
  );
  await held.release();
  const created = await next.created;
  t.equal(created.status, 'queued', 'answered once they committed');
  const statuses = (await Promise.all(jobs.map((j) => getGeneration(server, who, j.id)))).map((g) => g.status);
  t.same(statuses, ['succeeded', 'succeeded'], 'the settlements committed first');
  await cancelGeneration(server, who, created.id);
});
