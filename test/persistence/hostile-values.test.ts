import t from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import { boundQuery } from '../../persistence/bound-query.ts';
import { WorkspaceEntity } from '../../persistence/entities/workspace.ts';
import { ActorSnapshotEntity } from '../../persistence/entities/actor-snapshot.ts';
import { newId } from '../../persistence/ids.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';

// Values full of what would end or change a statement if it were SQL text: each is stored and read back as
// it is, through em.execute, the bulk writes' bound query and entity queries (on PGlite, or PostgreSQL
// with TEST_DATABASE_URL).
const HOSTILE = [
  `a;b`,
  `x'); drop table workspaces; --`,
  `"quoted" and 'single' and \`back\``,
  `back\\slash \\' \\\\ end\\`,
  `$1 $2 $$ $tag$ ?? ? \\? :name`,
  `-- comment /* open`,
  `naïve 漢字 😀 \u00a0 \t tab\nnew line`,
];

const fresh = await freshDatabaseUrl();
const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
t.teardown(async () => {
  await db.close();
  await fresh.drop();
});

t.test('em.execute and boundQuery: values bound, read back exactly', async (t) => {
  const em = db.em();
  for (const [i, value] of HOSTILE.entries()) {
    const [echo] = await em.execute<Array<{ v: string; n: number }>>('select ? as v, ? as n', [value, i]);
    t.same(echo, { v: value, n: i }, `select echo ${JSON.stringify(value)}`);
    const id = `h${i}`;
    await em.execute('insert into actor_snapshots (kind, id, version, state, updated_at) values (?, ?, 1, ?::jsonb, now())', [
      'hostile',
      id,
      JSON.stringify({ text: value }),
    ]);
    const [row] = await em.execute<Array<{ id: string; text: string; has: boolean }>>(
      `select id, state->>'text' as text, state \\? 'text' as has from actor_snapshots where kind = ? and state->>'text' = ?`,
      ['hostile', value],
    );
    t.same(row, { id, text: value, has: true }, `stored and found by value ${JSON.stringify(value)}`);
    const found = await em.execute<Array<{ id: string }>>('select id from actor_snapshots where kind = ? and state->>? in (?)', [
      'hostile',
      'text',
      [value, 'other;'],
    ]);
    t.same(found, [{ id }], 'in a list');
    const bound = await boundQuery<{ v: string }>(em, 'select ?::text as v', [value]);
    t.same(bound, [{ v: value }], 'boundQuery');
  }
  const [tables] = await em.execute<Array<{ n: number }>>(`select count(*)::int4 as n from information_schema.tables where table_name = 'workspaces'`);
  t.equal(tables!.n, 1, 'nothing was dropped');
});

t.test('entity queries: create, find by value, $in, $like, update by the unit of work and nativeUpdate, JSON properties', async (t) => {
  const now = new Date();
  const ids = HOSTILE.map(() => newId('ws'));
  const em = db.em();
  for (const [i, name] of HOSTILE.entries()) em.create(WorkspaceEntity, { id: ids[i]!, name, plan: 'free', personal: false, createdAt: now, updatedAt: now });
  await em.flush();

  for (const [i, name] of HOSTILE.entries()) {
    const found = await db.em().findOne(WorkspaceEntity, { name });
    t.equal(found?.id, ids[i], `findOne by ${JSON.stringify(name)}`);
    t.equal(found?.name, name, 'read back exactly');
  }
  const listed = await db.em().find(WorkspaceEntity, { name: { $in: HOSTILE } }, { orderBy: { id: 'asc' } });
  t.same(listed.map((w) => w.name).sort(), [...HOSTILE].sort(), '$in');
  t.equal(await db.em().count(WorkspaceEntity, { name: { $like: '%drop table%' } }), 1, '$like');

  // Updates by the unit of work (one statement for several rows) and by nativeUpdate.
  const writer = db.em();
  const rows = await writer.find(WorkspaceEntity, { id: { $in: ids } });
  for (const row of rows) row.name = `${row.name}|${HOSTILE[1]}`;
  await writer.flush();
  for (const [i, name] of HOSTILE.entries()) {
    t.equal((await db.em().findOne(WorkspaceEntity, { id: ids[i]! }))?.name, `${name}|${HOSTILE[1]}`, `flushed update of ${JSON.stringify(name)}`);
  }
  await db.em().nativeUpdate(WorkspaceEntity, { name: `${HOSTILE[4]}|${HOSTILE[1]}` }, { name: HOSTILE[5]! });
  t.equal((await db.em().findOne(WorkspaceEntity, { id: ids[4]! }))?.name, HOSTILE[5], 'nativeUpdate');

  const state = Object.fromEntries(HOSTILE.map((v, i) => [`k${i}${v}`, v]));
  await db.em().insertMany(
    ActorSnapshotEntity,
    HOSTILE.map((v, i) => ({ kind: 'entity', id: v, version: i, state: { text: v, all: state }, updatedAt: now })),
  );
  for (const value of HOSTILE) {
    const snap = await db.em().findOne(ActorSnapshotEntity, { kind: 'entity', id: value });
    t.same(snap?.state, { text: value, all: state }, `JSON state keyed by ${JSON.stringify(value)}`);
  }
  const byJson = await db.em().find(ActorSnapshotEntity, { kind: 'entity', state: { text: HOSTILE[1] } } as never);
  t.same(
    byJson.map((s) => s.id),
    [HOSTILE[1]],
    'a query on a JSON property',
  );
  t.equal(await db.em().count(WorkspaceEntity, {}), HOSTILE.length, 'the table is whole');
});
