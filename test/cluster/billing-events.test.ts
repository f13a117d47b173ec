import t from 'tap';
import { ClusterRouting } from '../../runtime/cluster/routing.ts';
import { signUp } from '../helpers/identity.ts';
import { post, signedEvent } from '../money/support.ts';
import { clusterDatabase, clusterEnv, ownerOf, startCluster, type NodeProcess, type Reply, NEEDS_POSTGRES_REDIS } from './support.ts';

const SHARDS = 12;
const EVENTS = '/v1/billing/events/local';

t.test(
  "a payment-provider event reaching any node is applied once, by the node that runs the payment's workspace",
  { skip: NEEDS_POSTGRES_REDIS },
  async (t) => {
    const db = await clusterDatabase(t);
    const env = clusterEnv(db.url, SHARDS, { LOCAL_PROVIDER_LATENCY_MS: '0' });
    const { nodes } = await startCluster(t, db, ['a', 'b', 'c'], env, SHARDS);

    const user = await signUp(nodes[0]!.client);
    const ws = user.workspaceId;
    const ownerId = await ownerOf(db, ws, SHARDS);
    t.ok(ownerId, "the workspace's shard has an owner");
    const owner = nodes.find((node) => node.id === ownerId)!;
    const [first, second] = nodes.filter((node) => node.id !== ownerId) as [NodeProcess, NodeProcess];
    t.comment(`workspace on ${owner.id}; events sent to ${first.id}, then ${second.id}`);

    const deposit = await post(first.client, '/v1/wallet/top-ups', user.cookie, { workspaceId: ws, amountCents: 2500 });
    t.equal(deposit.status, 201, JSON.stringify(deposit.body));
    const event = signedEvent(deposit.body.paymentId, 'payment.succeeded', { secret: env.BILLING_SIGNING_SECRET! });

    const send = (node: NodeProcess, body: string, headers: Record<string, string> = {}): Promise<Reply> =>
      node.client.json(EVENTS, { method: 'POST', headers: { 'content-type': 'application/json', 'x-billing-signature': event.signature, ...headers }, body });
    // As a provider does: a 503 (the workspace moving between nodes) is sent again after Retry-After, a bounded number of times.
    const deliver = async (node: NodeProcess, body: string, headers: Record<string, string> = {}): Promise<Reply> => {
      for (let attempt = 0; ; attempt++) {
        const reply = await send(node, body, headers);
        if (reply.status !== 503 || attempt === 10) return reply;
        t.comment(`${node.id} answered 503 (${reply.body?.error?.message}); sent again`);
        await new Promise((resolve) => setTimeout(resolve, Number(reply.headers.get('retry-after') ?? '1') * 1000));
      }
    };
    const books = async () => {
      const [account] = await db.em().execute<Array<{ wallet_cents: string }>>('select wallet_cents from workspace_accounts where workspace_id = ?', [ws]);
      const [ledger] = await db
        .em()
        .execute<Array<{ wallet_cents: string; deposits: string }>>(
          `select coalesce(sum(wallet_cents), 0)::int8 as wallet_cents, count(*) filter (where reference = ?)::int8 as deposits from credit_ledger where workspace_id = ?`,
          [`dep:${deposit.body.id}`, ws],
        );
      const [events] = await db
        .em()
        .execute<Array<{ n: string }>>('select count(*)::int8 as n from billing_events where payment_id = ? and applied', [deposit.body.paymentId]);
      return {
        wallet: Number(account?.wallet_cents ?? 0),
        ledger: Number(ledger!.wallet_cents),
        deposits: Number(ledger!.deposits),
        events: Number(events!.n),
      };
    };

    // A request another node forwarded is never forwarded again: signed with the cluster secret over these very
    // bytes and sent to a node that does not run the workspace, the event is refused with 503 and nothing moves.
    const signer = new ClusterRouting(undefined as never, { nodeId: 'x' } as never, undefined as never, env.CLUSTER_SECRET!);
    const loop = await send(first, event.raw, { 'x-cluster-forwarded': signer.sign('POST', EVENTS, event.raw) });
    t.equal(loop.status, 503, `a forwarded event reaching ${first.id}, which does not run the workspace, is refused`);
    t.equal(loop.body.error.code, 'service_unavailable');
    t.equal(loop.headers.get('retry-after'), '1');
    t.same(await books(), { wallet: 0, ledger: 0, deposits: 0, events: 0 }, 'nothing applied');

    // The cluster signature covers the body: one made over other bytes does not make the event a forwarded one,
    // so it is forwarded to the owner, which verifies the provider's signature again and applies it.
    const applied = await deliver(first, event.raw, { 'x-cluster-forwarded': signer.sign('POST', EVENTS, `${event.raw} `) });
    t.same([applied.status, applied.body], [200, { received: true, applied: true }], `the event sent to ${first.id} is applied`);
    t.same(await books(), { wallet: 2500, ledger: 2500, deposits: 1, events: 1 }, 'one deposit, one applied event: the wallet balance equals its ledger');
    const wallet = await second.client.json(`/v1/wallet?workspaceId=${ws}`, { headers: { cookie: user.cookie } });
    t.match(wallet.body, { balanceCents: 2500, activated: true }, `the owner's actor holds the balance (read through ${second.id})`);
    const deposits = await owner.client.json(`/v1/wallet/deposits?workspaceId=${ws}`, { headers: { cookie: user.cookie } });
    t.match(deposits.body.data, [{ id: deposit.body.id, status: 'paid', amountCents: 2500 }]);

    // The provider resends it: to yet another node, and to the owner. Acknowledged, applied once.
    const duplicate = await deliver(second, event.raw);
    t.same([duplicate.status, duplicate.body], [200, { received: true, applied: false }], `the same event sent to ${second.id}`);
    const atOwner = await deliver(owner, event.raw);
    t.same([atOwner.status, atOwner.body], [200, { received: true, applied: false }], `the same event sent to ${owner.id}`);

    // A tampered event is refused on every node before anything else, with the provider's validation error.
    const tampered = event.raw.replace('payment.succeeded', 'payment.failed');
    for (const node of nodes) {
      const refused = await send(node, tampered);
      t.match(refused, { status: 400, body: { error: { code: 'validation_error' } } }, `a tampered event on ${node.id}`);
      const unsigned = await node.client.json(EVENTS, { method: 'POST', headers: { 'content-type': 'application/json' }, body: event.raw });
      t.match(unsigned, { status: 400, body: { error: { code: 'validation_error' } } }, `an unsigned event on ${node.id}`);
    }
    const fresh = signedEvent(deposit.body.paymentId, 'payment.failed', { secret: env.BILLING_SIGNING_SECRET! });
    const late = await deliver(first, fresh.raw, { 'x-billing-signature': fresh.signature });
    t.same([late.status, late.body], [200, { received: true, applied: false }], 'a late failure of a paid payment changes nothing');
    t.same(await books(), { wallet: 2500, ledger: 2500, deposits: 1, events: 1 }, 'still one deposit and one applied event, the balance equal to the ledger');
  },
);
