import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type ipaddr from 'ipaddr.js';
import { checkUrlSyntax, embeddedIPv4, fetchGuarded, isPublicAddress, parseAddress } from '../../runtime/egress.ts';

t.test('a URL carrying a user name or a password alone is refused as having credentials', async (t) => {
  for (const url of ['https://user@example.com/', 'https://:secret@example.com/', 'https://user:secret@example.com/']) {
    t.same(checkUrlSyntax(url), { ok: false, reason: 'URLs with credentials are not allowed' }, url);
  }
  t.equal(checkUrlSyntax('https://example.com/').ok, true);
});

t.test('global unicast IPv6 passes whatever the low bits of its first group', async (t) => {
  for (const address of ['2a01:4f8::1', '2001:4860:4860::8888', '2606:4700:4700::1111', '3fff:ffff::1']) {
    t.equal(isPublicAddress(address), true, address);
  }
  for (const address of ['4000::1', '1fff::1']) t.equal(isPublicAddress(address), false, `${address}: outside 2000::/3`);
});

const carries = (address: string) => embeddedIPv4(parseAddress(address) as ipaddr.IPv6).map(String);

t.test('NAT64 local use (64:ff9b:1::/48): the IPv4 address at every RFC 6052 prefix length', async (t) => {
  // RFC 6052 section 2.4's examples of 192.0.2.33, moved under 64:ff9b:1::.
  for (const [length, address] of [
    [48, '64:ff9b:1:c000:2:2100::'],
    [56, '64:ff9b:1:c0:0:221::'],
    [64, '64:ff9b:1:0:c0:2:2100:0'],
    [96, '64:ff9b:1::c000:221'],
  ] as const) {
    t.ok(carries(address).includes('192.0.2.33'), `/${length}: ${address} carries 192.0.2.33 (${carries(address).join(', ')})`);
  }
  t.equal(carries('64:ff9b:1:c000:2:2100::').length, 4, 'one candidate per prefix length');
});

t.test('the well-known NAT64 prefix carries only in its /96; the rest of 64:ff9b::/32 carries nothing', async (t) => {
  t.same(carries('64:ff9b::c000:221'), ['192.0.2.33']);
  for (const address of ['64:ff9b:0:1::c000:221', '64:ff9b:0:0:1::c000:221', '64:ff9b::1:0:c000:221', '64:ff9b:2::c000:221']) {
    t.same(carries(address), [], address);
  }
});

t.test('ranges are told by their whole prefix, not by one group of it', async (t) => {
  t.same(carries('2a01:4f8::ffff:0:7f00:1'), [], 'ffff:0 in groups 4-5 of a global address is not IPv4-translated');
  t.equal(isPublicAddress('2a01:4f8::ffff:0:7f00:1'), true);
  t.same(carries('2a01:ff9b::7f00:1'), [], 'ff9b in group 1 without 64 in group 0 is not NAT64');
  t.equal(isPublicAddress('2a01:ff9b::7f00:1'), true);
  t.same(carries('64:1::7f00:1'), [], '64 in group 0 without ff9b is not NAT64');
  t.same(carries('2001:4860::8888'), [], '2001 followed by anything but 0 is not Teredo');
  t.same(carries('::ffff:0:7f00:1'), ['127.0.0.1'], 'IPv4-translated');
  t.same(carries('0:0:0:1:ffff:0:7f00:1'), [], 'but not with a non-zero group before it');
});

t.test('a Location header is followed only on a redirect status, and a redirect without one is the answer', async (t) => {
  const server = http.createServer((req, res) => {
    if (req.url === '/located') {
      res.writeHead(201, { location: '/elsewhere' });
      return res.end('created');
    }
    if (req.url === '/bare-redirect') {
      res.writeHead(302);
      return res.end('no location');
    }
    res.end('elsewhere');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const options = { maxBytes: 1000, timeoutMs: 5000, allowLoopback: true };
  const created = await fetchGuarded(`${origin}/located`, options);
  t.equal(created.status, 201, 'a 201 with a Location is the answer');
  t.equal(created.body.toString(), 'created');
  const bare = await fetchGuarded(`${origin}/bare-redirect`, options);
  t.equal(bare.status, 302, 'a 302 without a Location is the answer');
});
