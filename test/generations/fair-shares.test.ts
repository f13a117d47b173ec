import t from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createKey, signUp } from '../helpers/identity.ts';
import { eventually } from '../helpers/eventually.ts';
import { setPlan } from './support.ts';
import { createGeneration, serverQuery, waitFor } from './flow.ts';

const LATENCY_MS = 1_000;

async function proWorkspace(server: TestServer, name: string) {
  const user = await signUp(server);
  await setPlan(server, user.workspaceId, 'pro');
  const { key } = await createKey(server, user.cookie, user.workspaceId, ['generations.write', 'generations.read']);
  const ids: string[] = [];
  const create = async () => {
    const created = await createGeneration(server, key, user.workspaceId, {
      mode: 'text_to_text',
      model: 'local/text-mini',
      params: { prompt: `${name}${ids.length + 1}` },
    });
    if (created.status !== 201) throw new Error(JSON.stringify(created.body));
    ids.push(created.body.id);
    return created.body.id as string;
  };
  const until = (id: string, wanted: string) => waitFor(server, key, user.workspaceId, id, (g) => g.status === wanted, wanted);
  return { name, ids, create, until };
}

function poll<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  return eventually(check, { what, timeoutMs: 10_000, everyMs: 5 }) as Promise<T>;
}

t.test("one provider slot: workspace b's single job starts right after the job in flight, ahead of a's backlog of 20", async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 7, 1, 10, 0, 0));
  const server = await startTestServer(t, {
    clock,
    env: { LOCAL_PROVIDER_LATENCY_MS: String(LATENCY_MS), LOCAL_PROVIDER_MAX_CONCURRENT_JOBS: '1', RATE_LIMIT_PRO: '100000' },
  });
  const query = serverQuery(server);
  const a = await proWorkspace(server, 'a');
  const b = await proWorkspace(server, 'b');
  for (let i = 0; i < 20; i++) await a.create();
  await a.until(a.ids[0]!, 'submitted');
  const b1 = await b.create();
  await server.services.actors.drain();
  const nameOf = (id: string) => (id === b1 ? 'b1' : `a${a.ids.indexOf(id) + 1}`);

  // The manual clock moves one job's time at a time: each step ends the job in flight and the next one starts.
  const order: string[] = [];
  while (order.length < 21) {
    const [running] = await poll('the next job to start', async () => {
      const rows = await query<{ id: string }>(`select id from generations where status in ('reserved', 'submitted', 'running')`, []);
      return rows.length === 1 ? rows.map((r) => r.id) : undefined;
    });
    order.push(nameOf(running!));
    t.equal(order.filter((n) => n === order.at(-1)).length, 1, `${order.at(-1)} started once`);
    // Its provider has it (and its timers are on the clock) once it shows submitted: only then is time moved.
    await (running === b1 ? b : a).until(running!, 'submitted');
    clock.advance(LATENCY_MS);
    await (running === b1 ? b : a).until(running!, 'succeeded');
  }
  t.same(order.slice(0, 3), ['a1', 'b1', 'a2'], "b's job took the first slot freed, one job-time after it came");
  t.ok(order.indexOf('b1') <= 2, 'within two job-times');
  t.same(
    order.filter((n) => n !== 'b1'),
    a.ids.map((_, i) => `a${i + 1}`),
    "a's jobs kept their order",
  );
});
