import t from 'tap';
import { createKey, signUp, withKey } from '../helpers/identity.ts';
import { PLAN_CREDITS, providerCatalogFile } from '../helpers/provider-catalog.ts';
import { png, SECRET, startReplicateFake, TOKEN, VERSION } from '../fakes/replicate.ts';
import { isTerminal, ledgerByGeneration, moneyOf, waitFor } from '../generations/flow.ts';
import {
  clusterDatabase,
  clusterEnv,
  eventually,
  NEEDS_POSTGRES_REDIS,
  ownerOf,
  sendRetryingMoves,
  startCluster,
  type NodeProcess,
  type Reply,
} from './support.ts';

const SHARDS = 4;
const DEPLOYMENT = 'painter-replicate';
const EVENTS = `/v1/providers/${DEPLOYMENT}/events`;

/**
 * A provider's event reaching a node that does not run the job: Replicate's signed webhook is verified
 * there, handed to the node that runs the job's workspace, and the job settles once. Then a failover: the
 * node running a job at Replicate is killed, the other takes its shard over and follows the job (one
 * create at Replicate in all), and the event it is sent settles the job. PROVIDER_POLL_MS is long, so
 * only the events (and the one look-up a resume makes) can move the jobs.
 */
t.test(
  'a Replicate webhook sent to the node that does not run the job is verified, forwarded and applied once; after kill -9 of that node the other resumes the job and its event settles it',
  { skip: NEEDS_POSTGRES_REDIS },
  async (t) => {
    const fake = await startReplicateFake({ token: TOKEN, webhookSecret: SECRET });
    t.teardown(() => fake.close());
    fake.scenario(`version:${VERSION}`, { advance: 'manual', end: { status: 'succeeded', output: [fake.file('out.png', png(32, 16))] } });
    const catalogFile = providerCatalogFile(t, [
      {
        id: 'acme/painter',
        mode: 'text_to_image',
        credits: 7,
        parameters: { prompt: { required: true }, aspectRatio: {} },
        deployment: {
          id: DEPLOYMENT,
          provider: 'replicate',
          target: { version: VERSION },
          input: { aspectRatio: { width: 'width', height: 'height', longSide: 512 } },
        },
      },
    ]);

    const db = await clusterDatabase(t);
    const env = clusterEnv(db.url, SHARDS, {
      // A public HTTPS address (Replicate sends webhooks only there); this test delivers them itself.
      BASE_URL: 'https://gen.example.com',
      CATALOG_FILE: catalogFile,
      REPLICATE_API_TOKEN: TOKEN,
      REPLICATE_BASE_URL: fake.baseUrl,
      REPLICATE_WEBHOOK_SECRET: SECRET,
      PROVIDER_POLL_MS: '600000',
      PROVIDER_REQUEST_TIMEOUT_MS: '10000',
    });
    const { nodes } = await startCluster(t, db, ['a', 'b'], env, SHARDS);
    const user = await signUp(nodes[0]!.client);
    const ws = user.workspaceId;
    const { key } = await createKey(nodes[0]!.client, user.cookie, ws, ['generations.write', 'generations.read', 'assets.read']);
    const ownerId = await ownerOf(db, ws, SHARDS);
    const owner = nodes.find((node) => node.id === ownerId)!;
    const other = nodes.find((node) => node.id !== ownerId)!;
    t.comment(`workspace on ${owner.id}; events sent to ${other.id}`);

    // As a client should: a 503 (a lease renewal late under load, the workspace briefly between nodes) is sent again after Retry-After.
    const create = async (node: NodeProcess, prompt: string) => {
      const created = await sendRetryingMoves(node, '/v1/generations', {
        method: 'POST',
        headers: withKey(key),
        body: JSON.stringify({ workspaceId: ws, mode: 'text_to_image', model: 'acme/painter', params: { prompt, aspectRatio: '1:1' } }),
      });
      t.equal(created.status, 201, JSON.stringify(created.body));
      return (created.body as { id: string }).id;
    };
    const predictionOf = (prompt: string) => fake.creates.find((c) => (c.body.input as { prompt?: string }).prompt === prompt)!.predictionId;
    const send = (node: NodeProcess, event: { headers: Record<string, string>; body: Buffer | string }): Promise<Reply> =>
      node.client.json(EVENTS, { method: 'POST', headers: { 'content-type': 'application/json', ...event.headers }, body: event.body });
    // As Replicate does: a 503 (the job's workspace moving between nodes) is sent again a little later.
    const deliver = async (node: NodeProcess, event: { headers: Record<string, string>; body: Buffer }): Promise<Reply> => {
      for (let attempt = 0; ; attempt++) {
        const reply = await send(node, event);
        if (reply.status !== 503 || attempt === 20) return reply;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };
    const row = async (id: string) =>
      (
        await db.em().execute<Array<{ status: string; provider_job_id: string | null }>>('select status, provider_job_id from generations where id = ?', [id])
      )[0]!;

    // 1. An event at the node that does not run the job.
    const forwarded = await create(owner, 'an event at the other node');
    await waitFor(owner.client, key, ws, forwarded, (g) => g.status === 'submitted', 'submitted');
    const first = predictionOf('an event at the other node');
    fake.advance(first);
    fake.advance(first);
    t.equal(fake.prediction(first)?.status, 'succeeded');
    const completed = fake.webhook(first);

    const tampered = { headers: completed.headers, body: Buffer.from(completed.body.toString('utf8').replace('"succeeded"', '"failed"')) };
    const refused = await send(other, tampered);
    t.match(refused, { status: 400, body: { error: { code: 'validation_error' } } }, `a tampered event is refused by ${other.id} before anything else`);
    const forged = fake.webhook(first, { secret: `whsec_${Buffer.from('another key of thirty-two bytes!').toString('base64')}` });
    t.match(await send(other, forged), { status: 400, body: { error: { code: 'validation_error' } } }, 'an event signed with another secret is refused');
    t.same(await row(forwarded), { status: 'submitted', provider_job_id: first }, 'nothing changed');

    const applied = await deliver(other, completed);
    t.same([applied.status, applied.body], [200, { received: true, applied: true }], `the signed event sent to ${other.id} is applied (by ${owner.id})`);
    const done = await waitFor(owner.client, key, ws, forwarded, isTerminal, 'a terminal state');
    t.equal(done.status, 'succeeded', JSON.stringify([done.errorCode, done.errorMessage]));
    t.equal(done.outputAssetIds.length, 1, 'its image stored');
    t.equal(fake.counts.get, 0, 'no poll: the event settled it');
    for (const node of [other, owner]) {
      const again = await deliver(node, completed);
      t.same(
        [again.status, again.body],
        [200, { received: true, applied: false }],
        `the same event redelivered to ${node.id}: acknowledged, not applied again`,
      );
    }

    // 2. Failover: the node running a job at Replicate is killed; the other takes the shard over and follows it.
    const resumed = await create(owner, 'running at the failover');
    await waitFor(owner.client, key, ws, resumed, (g) => g.status === 'submitted', 'submitted');
    const second = predictionOf('running at the failover');
    fake.advance(second);
    t.equal(fake.prediction(second)?.status, 'processing', 'the prediction runs at Replicate');
    owner.child.proc.kill('SIGKILL');
    await owner.child.exited;
    await eventually(`${other.id} owns the workspace`, async () => ((await ownerOf(db, ws, SHARDS)) === other.id ? true : undefined), 30_000, 100);
    const followed = await waitFor(other.client, key, ws, resumed, (g) => g.status === 'running', 'running (resumed by the other node)');
    t.ok(
      followed.timeline.some((e) => e.detail === 'followed at its provider after a restart'),
      'followed at Replicate, not submitted again',
    );
    fake.advance(second);
    const settled = await deliver(other, fake.webhook(second));
    t.same([settled.status, settled.body], [200, { received: true, applied: true }], `the event sent to ${other.id}, which now runs the job`);
    const end = await waitFor(other.client, key, ws, resumed, isTerminal, 'a terminal state');
    t.equal(end.status, 'succeeded', JSON.stringify([end.errorCode, end.errorMessage]));

    t.equal(fake.submissions('an event at the other node'), 1, 'one create for the first job');
    t.equal(fake.submissions('running at the failover'), 1, 'one create for the resumed job: no second create after the failover');
    t.equal(fake.creates.length, 2);
    const query = <R>(sql: string, params: unknown[]) => db.em().execute<R[]>(sql, params);
    await eventually('nothing left reserved', async () => ((await moneyOf(query, ws)).reserved === 0 ? true : undefined), 10_000, 100);
    const left = PLAN_CREDITS - 2 * 7;
    t.same(
      await moneyOf(query, ws),
      { available: left, reserved: 0, ledgerAvailable: left, ledgerReserved: 0, reservations: [] },
      '2 × 7 credits captured once each; the balance equals the ledger',
    );
    const ledger = await ledgerByGeneration(query, ws);
    for (const id of [forwarded, resumed]) t.same(ledger[id], { reserve: 1, capture: 1 }, `${id}: reserved once, captured once`);
  },
);
