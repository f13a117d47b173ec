import t from 'tap';
import type { Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type ipaddr from 'ipaddr.js';
import {
  checkUrlSyntax,
  decodeDataUrl,
  EgressError,
  embeddedIPv4,
  fetchGuarded,
  guardedFetcher,
  guardedLookup,
  isLoopbackAddress,
  isPublicAddress,
  parseAddress,
  policyOf,
} from '../../runtime/egress.ts';

/** A loopback HTTP server with a few behaviours chosen by path. */
async function startOrigin(t: Test, host = '127.0.0.1') {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const hops = Number(url.searchParams.get('hops') ?? 0);
    if (url.pathname === '/redirect') {
      res.writeHead(302, { location: hops > 1 ? `/redirect?hops=${hops - 1}` : '/ok' });
      return res.end();
    }
    if (url.pathname === '/redirect-to') {
      res.writeHead(307, { location: url.searchParams.get('to')! });
      return res.end();
    }
    if (url.pathname === '/big') {
      res.writeHead(200, { 'content-length': '5000' });
      return res.end(Buffer.alloc(5000));
    }
    if (url.pathname === '/big-chunked') {
      res.writeHead(200);
      for (let i = 0; i < 10; i++) res.write(Buffer.alloc(1000));
      return res.end();
    }
    if (url.pathname === '/slow') return setTimeout(() => res.end('late'), 2000).unref();
    if (url.pathname === '/slow-body') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first part');
      return setTimeout(() => res.end('late'), 2000).unref();
    }
    if (url.pathname === '/redirect-with-big-body') {
      res.writeHead(302, { location: '/ok', 'content-length': '5000' });
      return res.end(Buffer.alloc(5000));
    }
    if (url.pathname === '/echo') {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => res.end(`${req.method} ${body}`));
      return;
    }
    if (url.pathname === '/missing') {
      res.writeHead(404);
      return res.end('no');
    }
    res.end('hello');
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://${host}:${(server.address() as AddressInfo).port}`;
}

async function refusal(promise: Promise<unknown>): Promise<EgressError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof EgressError) return error;
    throw error;
  }
  throw new Error('expected an EgressError');
}

const limits = { maxBytes: 1000, timeoutMs: 3000 };
// Tests narrow the policy to one loopback address: 127.0.0.2 stands for a public host, the rest of loopback stays refused.
const onlyOrigin = (address: string) => address === '127.0.0.2';

t.test('which addresses are public', async (t) => {
  for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '93.184.216.34', '::ffff:8.8.8.8'])
    t.ok(isPublicAddress(address), `${address} public`);
  for (const address of [
    '127.0.0.1',
    '127.255.0.9',
    '::1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.100.100.200',
    '0.0.0.0',
    '::',
    '224.0.0.1',
    '255.255.255.255',
    'fd00::1',
    'fd00:ec2::254',
    'fe80::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a00:1',
    '2002:7f00:1::',
    '198.18.0.1',
    'not an address',
    '100::1',
    'fec0::1',
    '5f00::1',
    '2001:db8::1',
    '4000::1',
    'e000::1',
  ])
    t.notOk(isPublicAddress(address), `${address} refused`);
});

// Every IPv6 form that carries an IPv4 address, each with IPv4 addresses of every refused kind.
const refusedIPv4 = [
  '127.0.0.1',
  '10.0.0.1',
  '172.16.0.1',
  '192.168.1.1',
  '169.254.169.254',
  '100.64.0.1',
  '0.0.0.0',
  '255.255.255.255',
  '224.0.0.1',
  '240.0.0.1',
  '192.0.2.1',
  '198.18.0.1',
];
const hex = (v4: string) => {
  const [a, b, c, d] = v4.split('.').map(Number) as [number, number, number, number];
  return [(a << 8) | b, (c << 8) | d].map((n) => n.toString(16));
};
const inverted = (v4: string) => hex(v4).map((h) => (parseInt(h, 16) ^ 0xffff).toString(16));
const forms: Array<[string, (v4: string) => string, boolean]> = [
  // [name, the IPv6 address carrying v4, whether it passes when v4 is public]
  ['IPv4-mapped ::ffff:0:0/96', (v4) => `::ffff:${v4}`, true],
  ['IPv4-compatible ::/96', (v4) => `::${v4}`, false],
  ['IPv4-compatible ::/96, hex', (v4) => `::${hex(v4).join(':')}`, false],
  ['IPv4-translated ::ffff:0:0:0/96', (v4) => `::ffff:0:${v4}`, false],
  ['NAT64 64:ff9b::/96', (v4) => `64:ff9b::${v4}`, false],
  ['NAT64 local-use 64:ff9b:1::/48, a /96 prefix', (v4) => `64:ff9b:1::${v4}`, false],
  ['6to4 2002::/16', (v4) => `2002:${hex(v4).join(':')}::1`, false],
  ['Teredo 2001::/32, server', (v4) => `2001:0:${hex(v4).join(':')}:0:f7f7:f7f7:f7f7`, false],
  ['Teredo 2001::/32, client', (v4) => `2001:0:808:808:0:0:${inverted(v4).join(':')}`, false],
];

t.test('IPv6 forms that carry an IPv4 address: the IPv4 rule first, then the IPv6 range rule', async (t) => {
  for (const [name, form, passesWhenPublic] of forms) {
    for (const v4 of refusedIPv4) {
      const address = form(v4);
      t.ok(
        embeddedIPv4(parseAddress(address) as ipaddr.IPv6).some((carried) => carried.toString() === v4),
        `${name}: ${address} carries ${v4}`,
      );
      t.notOk(isPublicAddress(address), `${name}: ${address} (${v4}) refused`);
    }
    const publicCarrier = form('8.8.8.8');
    t.equal(
      isPublicAddress(publicCarrier),
      passesWhenPublic,
      `${name}: ${publicCarrier} (8.8.8.8) ${passesWhenPublic ? 'passes' : 'refused by its IPv6 range'}`,
    );
  }
  // The local-use NAT64 prefix with a /48 prefix length: 127.0.0.1 in bits 48-63 and 72-87 (the u octet, 64-71, skipped).
  t.ok(
    embeddedIPv4(parseAddress('64:ff9b:1:7f00:0:100::') as ipaddr.IPv6).some((v4) => v4.toString() === '127.0.0.1'),
    'RFC 6052 /48 layout',
  );
  t.same(embeddedIPv4(parseAddress('2606:4700:4700::1111') as ipaddr.IPv6), [], 'a plain address carries nothing');
  t.same(
    embeddedIPv4(parseAddress('2001:0:4136:e378:8000:63bf:3fff:fdd2') as ipaddr.IPv6).map(String),
    ['65.54.227.120', '192.0.2.45'],
    'the Teredo example of RFC 4380',
  );

  // The URL check and the connect-time check use the same rule.
  for (const host of ['::127.0.0.1', '::a00:1', '::a9fe:a9fe', '64:ff9b::7f00:1', '2002:a9fe:a9fe::1']) {
    const verdict = checkUrlSyntax(`http://[${host}]/`);
    t.notOk(verdict.ok, `http://[${host}]/ refused`);
    if (!verdict.ok) t.match(verdict.reason, /not a public address \(it carries /);
  }
  const lookup = guardedLookup(isPublicAddress);
  const refusedAtConnect = await new Promise<Error | null>((resolve) => lookup('::7f00:1', {}, (error) => resolve(error)));
  t.equal((refusedAtConnect as EgressError | null)?.code, 'blocked_address', 'an address DNS answers is checked by the same rule');
  t.match(refusedAtConnect?.message, /it carries 127\.0\.0\.1/);
});

t.test('URL syntax: http(s) only, no credentials, IP literals checked', async (t) => {
  t.ok(checkUrlSyntax('https://example.com/a.png').ok);
  for (const url of [
    'ftp://example.com/a',
    'file:///etc/passwd',
    'javascript:alert(1)',
    'gopher://x',
    'not a url',
    'https://user:pw@example.com/',
    'http://127.0.0.1/',
    'http://[::1]/',
    'http://0x7f000001/',
    'http://2130706433/',
    'http://127.1/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::ffff:169.254.169.254]/',
    'http://0.0.0.0/',
  ]) {
    t.notOk(checkUrlSyntax(url).ok, url);
  }
  t.ok(checkUrlSyntax('http://127.0.0.1/', { allowPrivate: true }).ok, 'allowed by the operator switch');
});

t.test('loopback is refused unless private egress is allowed, by literal and by name', async (t) => {
  const origin = await startOrigin(t);
  const port = new URL(origin).port;
  t.equal((await refusal(fetchGuarded(`${origin}/`, limits))).code, 'blocked_address', '127.0.0.1');
  const byName = await refusal(fetchGuarded(`http://localhost:${port}/`, limits));
  t.equal(byName.code, 'blocked_address', 'localhost, which resolves to loopback, is refused at connect time');
  t.match(byName.message, /localhost resolves to/);
  t.equal((await refusal(fetchGuarded(`http://[::ffff:127.0.0.1]:${port}/`, limits))).code, 'blocked_address', 'IPv4-mapped IPv6');
  t.equal((await refusal(fetchGuarded(`http://[::127.0.0.1]:${port}/`, limits))).code, 'blocked_address', 'IPv4-compatible IPv6');
  t.equal((await refusal(fetchGuarded('http://169.254.169.254/latest/meta-data/', limits))).code, 'blocked_address', 'cloud metadata');
  t.equal((await refusal(fetchGuarded('ftp://example.com/', limits))).code, 'invalid_url');

  const allowed = await fetchGuarded(`http://localhost:${port}/`, { ...limits, allowPrivate: true });
  t.equal(allowed.status, 200);
  t.equal(allowed.body.toString(), 'hello');
});

t.test('redirects are followed (at most 3) and each target is checked', async (t) => {
  const origin = await startOrigin(t, '127.0.0.2');
  const port = new URL(origin).port;
  const three = await fetchGuarded(`${origin}/redirect?hops=3`, { ...limits, allowAddress: onlyOrigin });
  t.equal(three.status, 200);
  t.equal(three.url, `${origin}/ok`);
  t.equal((await refusal(fetchGuarded(`${origin}/redirect?hops=4`, { ...limits, allowAddress: onlyOrigin }))).code, 'too_many_redirects');

  const toPrivate = await refusal(
    fetchGuarded(`${origin}/redirect-to?to=${encodeURIComponent(`http://127.0.0.1:${port}/`)}`, { ...limits, allowAddress: onlyOrigin }),
  );
  t.equal(toPrivate.code, 'blocked_address', 'a redirect to a refused address');
  const toMetadata = await refusal(
    fetchGuarded(`${origin}/redirect-to?to=${encodeURIComponent('http://169.254.169.254/')}`, { ...limits, allowAddress: onlyOrigin }),
  );
  t.equal(toMetadata.code, 'blocked_address', 'a redirect to the metadata address');
  const toName = await refusal(
    fetchGuarded(`${origin}/redirect-to?to=${encodeURIComponent(`http://localhost:${port}/`)}`, { ...limits, allowAddress: onlyOrigin }),
  );
  t.equal(toName.code, 'blocked_address', 'a redirect to a name is checked on what the name resolves to');
  t.match(toName.message, /localhost resolves to/);
  const toFile = await refusal(fetchGuarded(`${origin}/redirect-to?to=${encodeURIComponent('file:///etc/passwd')}`, { ...limits, allowPrivate: true }));
  t.equal(toFile.code, 'invalid_url', 'a redirect to another scheme');

  const bigRedirect = await fetchGuarded(`${origin}/redirect-with-big-body`, { ...limits, allowAddress: onlyOrigin });
  t.same([bigRedirect.status, bigRedirect.body.toString()], [200, 'hello'], "a followed redirect's body is not read, so its size does not matter");
  const unfollowed = await fetchGuarded(`${origin}/redirect?hops=1`, { ...limits, allowPrivate: true, maxRedirects: 0 });
  t.equal(unfollowed.status, 302, 'with maxRedirects 0 the redirect is the answer');
});

t.test('size and time limits', async (t) => {
  const origin = await startOrigin(t);
  const options = { ...limits, allowPrivate: true };
  const declared = await refusal(fetchGuarded(`${origin}/big`, options));
  t.equal(declared.code, 'too_large', 'a declared length past the limit');
  const streamed = await refusal(fetchGuarded(`${origin}/big-chunked`, options));
  t.equal(streamed.code, 'too_large', 'a chunked body past the limit');
  t.equal((await fetchGuarded(`${origin}/big`, { ...options, maxBytes: 5000 })).body.length, 5000, 'exactly the limit passes');
  const started = Date.now();
  const slow = await refusal(fetchGuarded(`${origin}/slow`, { ...options, timeoutMs: 300 }));
  t.equal(slow.code, 'timeout');
  t.ok(Date.now() - started < 1500, 'given up at the time limit');
  const slowBody = await refusal(fetchGuarded(`${origin}/slow-body`, { ...options, timeoutMs: 300 }));
  t.equal(slowBody.code, 'timeout', 'the limit covers the body too, not only the headers');
  t.match(slowBody.message, /no complete answer within 300 ms/);
  const redirected = await refusal(fetchGuarded(`${origin}/redirect-to?to=${encodeURIComponent(`${origin}/slow`)}`, { ...options, timeoutMs: 300 }));
  t.equal(redirected.code, 'timeout', 'one limit for the whole exchange, redirects included');
  const unlimitedBody = await fetchGuarded(`${origin}/redirect-with-big-body`, { ...options, maxRedirects: 0, maxBytes: 5000 });
  t.same([unlimitedBody.status, unlimitedBody.body.length], [302, 5000], 'an unfollowed redirect is an answer with its body');
  const posted = await fetchGuarded(`${origin}/echo`, { ...options, method: 'POST', body: 'payload', headers: { 'content-type': 'text/plain' } });
  t.equal(posted.body.toString(), 'POST payload');

  const fetcher = guardedFetcher(options);
  t.equal((await fetcher(`${origin}/`)).toString(), 'hello');
  t.match((await refusal(fetcher(`${origin}/missing`))).message, /answered 404/);
  t.equal((await refusal(guardedFetcher(limits)(`${origin}/`))).code, 'blocked_address', 'the fetcher keeps the guard');
});

t.test('data URLs: the mime rule and limits', async (t) => {
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
  const decoded = decodeDataUrl(`data:image/png;base64,${png.toString('base64')}`, 'image', 100);
  t.equal(decoded.contentType, 'image/png');
  t.ok(decoded.bytes.equals(png));
  t.equal(decodeDataUrl(`data:video/mp4;base64,${png.toString('base64')}`, 'video', 100).contentType, 'video/mp4');
  for (const [url, mediaType, code] of [
    [`data:video/mp4;base64,${png.toString('base64')}`, 'image', 'invalid_url'],
    [`data:image/png;base64,${png.toString('base64')}`, 'video', 'invalid_url'],
    [`data:text/plain;base64,${png.toString('base64')}`, 'image', 'invalid_url'],
    ['data:image/png,rawtext', 'image', 'invalid_url'],
    ['data:image/png;base64,', 'image', 'invalid_url'],
    ['data:image/png;base64,@@@', 'image', 'invalid_url'],
    [`data:image/png;base64,${Buffer.alloc(200).toString('base64')}`, 'image', 'too_large'],
  ] as Array<[string, 'image' | 'video', string]>) {
    let error: unknown;
    try {
      decodeDataUrl(url, mediaType, 100);
    } catch (caught) {
      error = caught;
    }
    t.equal((error as EgressError)?.code, code, `${url.slice(0, 30)} as ${mediaType}`);
  }
});

t.test('development mode (allowLoopback): loopback addresses besides public ones, no other private range', async (t) => {
  const policy = policyOf({ allowLoopback: true });
  for (const address of ['127.0.0.1', '127.3.2.1', '::1', '::ffff:127.0.0.1']) {
    t.ok(isLoopbackAddress(address), `${address} is loopback`);
    t.ok(policy(address), `${address} allowed`);
  }
  t.ok(policy('8.8.8.8'), 'public addresses still allowed');
  for (const address of [
    '10.0.0.1',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::',
    'fc00::1',
    'fe80::1',
    '64:ff9b::a9fe:a9fe',
    'not an address',
  ]) {
    t.notOk(policy(address), `${address} still refused`);
  }
  t.ok(checkUrlSyntax('http://127.0.0.1:9000/hooks', { allowLoopback: true }).ok, 'a loopback URL passes the syntax check');
  t.notOk(checkUrlSyntax('http://169.254.169.254/latest/meta-data/', { allowLoopback: true }).ok, 'the metadata endpoint does not');
  t.notOk(checkUrlSyntax('http://127.0.0.1:9000/hooks').ok, 'without it, loopback is refused as before');

  const origin = await startOrigin(t);
  const answered = await fetchGuarded(`${origin}/ok`, { maxBytes: 1000, timeoutMs: 5000, allowLoopback: true });
  t.equal(answered.status, 200, 'a request to a loopback origin is made');
  await t.rejects(fetchGuarded(`${origin}/ok`, { maxBytes: 1000, timeoutMs: 5000 }), EgressError, 'and refused without it');
});
