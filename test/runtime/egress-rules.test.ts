import t from 'tap';
import { checkUrlSyntax, isPublicAddress } from '../../runtime/egress.ts';

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
