import t from 'tap';
import { openDatabase } from '../../persistence/database.ts';
import { shardOfSql } from '../../persistence/cluster/shard-sql.ts';
import { shardOf } from '../../runtime/cluster/shard.ts';
import { freshDatabaseUrl } from '../helpers/database.ts';

t.test('the shard of a workspace computed in SQL is the one computed in JavaScript', async (t) => {
  const fresh = await freshDatabaseUrl();
  const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '.data/test' });
  t.teardown(async () => {
    await db.close();
    await fresh.drop();
  });
  const ids = ['abc', 'ws_01J9ZK3V6Q1X2Y3Z4A5B6C7D8E', 'é-ünïcødé-✓', ...Array.from({ length: 300 }, (_, i) => `ws_${i}`)];
  for (const count of [1, 7, 64, 4096]) {
    const rows = await db
      .em()
      .execute<{ id: string; shard: number }[]>(`select id, ${shardOfSql('id')} as shard from jsonb_array_elements_text(?::jsonb) as ids(id)`, [
        count,
        JSON.stringify(ids),
      ]);
    const mismatches = rows.filter((row) => Number(row.shard) !== shardOf(row.id, count));
    t.same(mismatches, [], `${count} shards: all ${rows.length} ids agree`);
  }
  t.throws(() => shardOfSql('id; drop table x'), /not a column name/);
});
