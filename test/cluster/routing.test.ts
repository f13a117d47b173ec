import t from 'tap';
import { ClusterRouting } from '../../runtime/cluster/routing.ts';
import type { ClusterNode } from '../../runtime/cluster/cluster-node.ts';
import type { ShardHost } from '../../runtime/cluster/shard-host.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { ShardOwners } from '../../runtime/cluster/shard-owners.ts';

const SECRET = 'a-cluster-secret-of-at-least-32-chars';
const routing = (nodeId: string, secret: string, now: () => number) =>
  new ClusterRouting(undefined as unknown as ShardOwners, { nodeId } as ClusterNode, undefined as unknown as ShardHost, secret, now);

t.test('a forwarded request is recognised only with the shared secret, for its own method and target, and only recently', async (t) => {
  let clock = 1_000_000;
  const a = routing('a', SECRET, () => clock);
  const b = routing('b', SECRET, () => clock);
  const header = a.sign('POST', '/v1/generations?x=1', undefined);
  t.ok(b.verify(header, 'POST', '/v1/generations?x=1', undefined), 'another node with the same secret accepts it');
  t.notOk(b.verify(header, 'POST', '/v1/generations?x=2', undefined), 'not for another target');
  t.notOk(b.verify(header, 'DELETE', '/v1/generations?x=1', undefined), 'not for another method');
  t.notOk(
    routing('b', 'another-secret-of-at-least-32-chars!!', () => clock).verify(header, 'POST', '/v1/generations?x=1', undefined),
    'not with another secret',
  );
  t.notOk(b.verify(header.replace(/\.a\./, '.c.'), 'POST', '/v1/generations?x=1', undefined), 'not under another node id');
  t.notOk(b.verify('123.a.nothex', 'POST', '/v1/generations?x=1', undefined), 'a malformed header is refused');
  clock += 61_000;
  t.notOk(b.verify(header, 'POST', '/v1/generations?x=1', undefined), 'not a minute later');
});

t.test('the signature covers the exact bytes of the body', async (t) => {
  const clock = () => 2_000_000;
  const a = routing('a', SECRET, clock);
  const b = routing('b', SECRET, clock);
  const json = JSON.stringify({ workspaceId: 'ws_1', amountCents: 1000 });
  const header = a.sign('POST', '/v1/wallet/top-ups', json);
  t.ok(b.verify(header, 'POST', '/v1/wallet/top-ups', Buffer.from(json)), 'the same bytes received: forwarded (a string is signed as its UTF-8 bytes)');
  t.notOk(b.verify(header, 'POST', '/v1/wallet/top-ups', json.replace('1000', '9000')), 'an altered body is not');
  t.notOk(b.verify(header, 'POST', '/v1/wallet/top-ups', `${json} `), 'nor one with a byte added, even if it parses to the same value');
  t.notOk(b.verify(header, 'POST', '/v1/wallet/top-ups', undefined), 'nor the same request with its body removed');
  t.notOk(b.verify(a.sign('POST', '/v1/wallet/top-ups', undefined), 'POST', '/v1/wallet/top-ups', json), 'nor a body added to a request signed without one');
  t.ok(
    b.verify(a.sign('GET', '/v1/wallet?workspaceId=ws_1', undefined), 'GET', '/v1/wallet?workspaceId=ws_1', Buffer.alloc(0)),
    'no body and an empty body are the same bytes',
  );

  const event = Buffer.from('{"id":"evt_0123456789","type":"payment.succeeded","data":{"paymentId":"pay_1"}}\n\u00e9', 'utf8');
  const signed = a.sign('POST', '/v1/billing/events/local', event);
  t.ok(b.verify(signed, 'POST', '/v1/billing/events/local', Buffer.from(event)), 'raw bytes, as read from the wire');
  const flipped = Buffer.from(event);
  flipped[flipped.length - 1]! ^= 1;
  t.notOk(b.verify(signed, 'POST', '/v1/billing/events/local', flipped), 'one bit changed');
});

t.test('placement: here, at the owner it knows without asking the database, and asked again after a failed forward', async (t) => {
  const clock = new ManualClock();
  const owned = new Set([0]);
  const node = {
    nodeId: 'a',
    owns: (shard: number) => (owned.has(shard) ? { shard, epoch: 1 } : undefined),
    isHandingOver: () => false,
  } as unknown as ClusterNode;
  const host = { shardOf: (workspaceId: string) => Number(workspaceId.slice(3)) } as unknown as ShardHost;
  const table = new Map([
    [1, { nodeId: 'b', address: 'b:1', epoch: 3, remainingMs: 5_000 }],
    [2, { nodeId: 'a', address: 'a:1', epoch: 2, remainingMs: 5_000 }],
  ]);
  const reads: number[] = [];
  const owners = new ShardOwners(async (shard) => {
    reads.push(shard);
    return table.get(shard);
  }, clock);
  const routing = new ClusterRouting(owners, node, host, SECRET, () => clock.now());

  t.same(await routing.placement('ws_0'), { kind: 'here' });
  const remote = await routing.placement('ws_1');
  t.same(remote, { kind: 'remote', shard: 1, nodeId: 'b', address: 'b:1' });
  t.same(await routing.placement('ws_1'), remote);
  t.same(reads, [1], 'one read for two requests');
  t.same(await routing.placement('ws_2'), { kind: 'unavailable' }, 'the table names this node, which does not hold the lease: nobody serves it now');
  t.same(await routing.placement('ws_3'), { kind: 'unavailable' }, 'no owner');

  table.set(1, { nodeId: 'c', address: 'c:1', epoch: 4, remainingMs: 5_000 });
  t.same(await routing.placement('ws_1'), remote, 'still the node it knows');
  routing.forwardFailed(remote as Extract<typeof remote, { kind: 'remote' }>);
  t.same(await routing.placement('ws_1'), { kind: 'remote', shard: 1, nodeId: 'c', address: 'c:1' }, 'after a failed forward: the new owner');
});
