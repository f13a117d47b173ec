import t, { type Test } from 'tap';
import { ManualClock } from '../../runtime/clock.ts';
import { createLogger } from '../../runtime/logger.ts';
import { shippedCatalog } from '../helpers/catalog.ts';

const SHIPPED = shippedCatalog();
import { openDatabase, type Database } from '../../persistence/database.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';
import { KeyCache } from '../../http/auth/key-cache.ts';
import { sha256Hex } from '../../http/auth/tokens.ts';

async function database(t: Test): Promise<Database> {
  const url = await freshDatabaseUrl();
  const db = await openDatabase({ databaseUrl: url.url, dataDir: '.data/test' });
  t.teardown(async () => {
    await db.close();
    await url.drop();
  });
  await db.em().execute(`insert into workspaces (id, name, plan, created_at, updated_at) values ('ws_a', 'A', 'pro', now(), now())`);
  return db;
}

async function insertKey(db: Database, id: string, hash: string, extra = ''): Promise<void> {
  await db.em().execute(
    `insert into api_keys (id, workspace_id, name, prefix, key_hash, scopes, created_at, updated_at${extra ? ', revoked_at' : ''})
    values (?, 'ws_a', 'k', 'gs_live_abcd', ?, '["assets.read"]', now(), now()${extra ? ', now()' : ''})`,
    [id, hash],
  );
}

function cache(db: Database, clock: ManualClock, maxEntries = 100) {
  return new KeyCache({ db, clock, logger: createLogger('silent'), plans: () => SHIPPED, maxEntries, ttlMs: 60_000 });
}

t.test('records come from memory until the TTL, then from the database again', async (t) => {
  const db = await database(t);
  const clock = new ManualClock();
  const keys = cache(db, clock);
  const hash = sha256Hex('one');
  await insertKey(db, 'key_1', hash);
  const record = await keys.lookup(hash);
  t.match(record, { id: 'key_1', workspaceId: 'ws_a', revoked: false, expiresAt: null, requestsPerMinute: 600 });
  t.same([...record!.scopes], ['assets.read']);
  await db.em().execute(`update api_keys set revoked_at = now() where id = 'key_1'`);
  t.equal((await keys.lookup(hash))!.revoked, false, "a change made behind the cache's back is not seen within the TTL");
  t.notOk(keys.lookup(hash) instanceof Promise, 'a fresh entry is answered synchronously');
  clock.advance(60_000);
  t.equal((await keys.lookup(hash))!.revoked, true, 'after the TTL the record is read again');
});

t.test('drop and invalidate take effect at once; unknown hashes are remembered too', async (t) => {
  const db = await database(t);
  const clock = new ManualClock();
  const keys = cache(db, clock);
  const hash = sha256Hex('two');
  t.equal(await keys.lookup(hash), null, 'unknown');
  await insertKey(db, 'key_2', hash);
  t.equal(await keys.lookup(hash), null, 'still unknown from memory');
  keys.drop(hash);
  t.equal((await keys.lookup(hash))!.id, 'key_2');
  await db.em().execute(`update api_keys set revoked_at = now() where id = 'key_2'`);
  await keys.invalidate(hash);
  t.equal((await keys.lookup(hash))!.revoked, true, 'the next lookup after invalidate reads the change');
});

t.test('a load that was under way when its key was dropped does not refill the cache with what it read', async (t) => {
  const db = await database(t);
  const keys = cache(db, new ManualClock());
  const hash = sha256Hex('three');
  await insertKey(db, 'key_3', hash);
  const loading = keys.lookup(hash);
  keys.drop(hash);
  t.equal((await loading)!.id, 'key_3', 'the caller already waiting still gets an answer');
  t.equal(keys.size, 0, 'but nothing was cached');
});

t.test('the cache is bounded', async (t) => {
  const db = await database(t);
  const keys = cache(db, new ManualClock(), 3);
  for (let i = 0; i < 5; i++) {
    await insertKey(db, `key_b${i}`, sha256Hex(`b${i}`));
    await keys.lookup(sha256Hex(`b${i}`));
  }
  t.equal(keys.size, 3);
});

t.test('a recently read key stays cached; the least recently used one is evicted', async (t) => {
  const db = await database(t);
  const keys = cache(db, new ManualClock(), 3);
  for (const name of ['c0', 'c1', 'c2']) {
    await insertKey(db, `key_${name}`, sha256Hex(name));
    await keys.lookup(sha256Hex(name));
  }
  // c0 was cached first but is read now, so c1 becomes the least recently used.
  t.equal((await keys.lookup(sha256Hex('c0')))?.id, 'key_c0', 'c0 is read');
  await insertKey(db, 'key_c3', sha256Hex('c3'));
  await keys.lookup(sha256Hex('c3'));
  t.equal(keys.size, 3);
  // With the rows gone, what is still cached answers from memory and what was evicted reads the database again.
  await db.em().execute(`delete from api_keys where workspace_id = 'ws_a'`);
  for (const name of ['c0', 'c2', 'c3']) {
    const answer = keys.lookup(sha256Hex(name));
    t.notOk(answer instanceof Promise, `${name} is still cached`);
    t.equal((await answer)?.id, `key_${name}`, `${name} answers from memory`);
  }
  t.equal(await keys.lookup(sha256Hex('c1')), null, 'c1, the least recently used, was evicted and is read again (and is gone)');
});
