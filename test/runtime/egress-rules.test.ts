import t from 'tap';
import { checkUrlSyntax } from '../../runtime/egress.ts';

t.test('a URL carrying a user name or a password alone is refused as having credentials', async (t) => {
  for (const url of ['https://user@example.com/', 'https://:secret@example.com/', 'https://user:secret@example.com/']) {
    t.same(checkUrlSyntax(url), { ok: false, reason: 'URLs with credentials are not allowed' }, url);
  }
  t.equal(checkUrlSyntax('https://example.com/').ok, true);
});
