import t from 'tap';
import { raw, JsonProperty } from '@mikro-orm/core';
import { PostgreSqlPlatform, knex } from '@mikro-orm/postgresql';
import { bindStatement } from '../../persistence/bound-sql.ts';

// What MikroORM would have spliced into the SQL text travels as a driver parameter instead; the text keeps
// only what the code wrote.
const platform = new PostgreSqlPlatform();
const HOSTILE = `a'; drop table users; --"\\ $1 ?? é`;

t.test('a value is a parameter, never text; `??` is a quoted identifier; `\\?` stays a literal question mark', async (t) => {
  t.same(bindStatement(platform, 'select ?? from t where a = ? and b \\? c', ['my col', HOSTILE]), {
    sql: 'select "my col" from t where a = ? and b \\? c',
    bindings: [HOSTILE],
  });
  const { sql } = bindStatement(platform, 'update t set a = ?, b = ?', [HOSTILE, 'x;y']);
  t.notMatch(sql, /drop|;/, 'no part of a value reaches the SQL text');
  t.same(bindStatement(platform, 'select 1', []), { sql: 'select 1', bindings: [] }, 'no parameters: the text as written');
});

t.test('arrays become one parameter per item (`in (?)`); JSON-marked arrays and objects are JSON text', async (t) => {
  t.same(bindStatement(platform, 'a in (?)', [['x', 'y;z', 7]]), { sql: 'a in (?, ?, ?::int4)', bindings: ['x', 'y;z', 7] });
  const json = Object.assign([1, 'two'], { [JsonProperty]: {} });
  t.same(bindStatement(platform, 'a = ?', [json]), { sql: 'a = ?', bindings: ['[1,"two"]'] });
  t.same(bindStatement(platform, 'a = ?', [{ k: HOSTILE, n: [1] }]), { sql: 'a = ?', bindings: [JSON.stringify({ k: HOSTILE, n: [1] })] });
});

t.test('dates in the platform format; null, undefined, bigint and buffers as the driver takes them', async (t) => {
  const date = new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6));
  t.same(bindStatement(platform, 'a = ?', [date]).bindings, ['2026-01-02T03:04:05.006+00:00']);
  t.same(bindStatement(platform, 'a = ? and b = ?', [null, undefined]).bindings, [null, null]);
  t.same(bindStatement(platform, 'a = ?', [12345678901234567890n]).bindings, ['12345678901234567890']);
  const bytes = Buffer.from([0, 1, 2]);
  t.equal(bindStatement(platform, 'a = ?', [bytes]).bindings[0], bytes, 'a buffer is passed as it is');
});

t.test('numbers and booleans carry the type their literal had', async (t) => {
  const cast = (value: unknown) => bindStatement(platform, '?', [value]).sql;
  t.equal(cast(true), '?::boolean');
  t.equal(cast(false), '?::boolean');
  t.equal(cast(71), '?::int4');
  t.equal(cast(-2147483648), '?::int4');
  t.equal(cast(2147483648), '?::int8');
  t.equal(cast(536870912000), '?::int8');
  t.equal(cast(2 ** 60), '?::numeric', 'past 2^53 an integer is numeric');
  t.equal(cast(1.5), '?::numeric');
  t.equal(cast(Infinity), '?::float8');
  t.equal(cast(NaN), '?::float8');
  t.equal(cast('71'), '?', 'a string is left to the column it meets');
});

t.test('raw fragments are inlined as SQL with their own parameters bound in turn', async (t) => {
  t.same(bindStatement(platform, 'a = ? and b = ?', [raw('now() - ?::interval', ['1 day']), HOSTILE]), {
    sql: 'a = now() - ?::interval and b = ?',
    bindings: ['1 day', HOSTILE],
  });
  const builder = knex({ client: 'pg' });
  t.same(bindStatement(platform, 'a = ? and b = ?', [builder.raw('lower(?) || ?', ['X;Y', 2]), 'z']), {
    sql: 'a = lower(?) || ?::int4 and b = ?',
    bindings: ['X;Y', 2, 'z'],
  });
  await builder.destroy();
});
