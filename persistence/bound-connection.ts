import { type AbstractSqlConnection, AbstractSqlDriver, PostgreSqlConnection, PostgreSqlPlatform, type Configuration } from '@mikro-orm/postgresql';
import { bindStatement } from './bound-sql.ts';
import { DirectTransaction } from './direct-transaction.ts';
import { madeInTransaction } from './driver-internals.ts';

type ExecuteArgs = Parameters<AbstractSqlConnection['execute']>;
type ConnectionClass = abstract new (...args: any[]) => AbstractSqlConnection;

/**
 * A connection whose statements carry their values as driver parameters (see bound-sql.ts): every query
 * MikroORM builds, every `em.execute`, and the unit of work's own writes.
 */
export function bindingParameters<Base extends ConnectionClass>(Base: Base) {
  abstract class Bound extends Base {
    override async execute(...[queryOrKnex, params = [], method = 'all', ctx, loggerContext]: ExecuteArgs): Promise<any> {
      // A direct transaction holds its connection already. Its statements are sent without a wait before
      // them, so those asked for together go in one round trip (direct-transaction.ts).
      if (!(ctx instanceof DirectTransaction)) await this.ensureConnection();
      let sql: string;
      let values: readonly unknown[] = params;
      if (typeof queryOrKnex === 'string') {
        sql = queryOrKnex;
      } else {
        ctx ??= (madeInTransaction(queryOrKnex) ? queryOrKnex : null) as never;
        const compiled = queryOrKnex.toSQL();
        sql = compiled.sql;
        values = compiled.bindings ?? [];
      }
      sql = this.config.get('onQuery')(sql, values as unknown[]);
      const bound = values.length === 0 ? undefined : bindStatement(this.platform, sql, values);
      // A statement of a direct transaction (a batch of strict writes) runs on its connection, outside the ORM.
      if (ctx instanceof DirectTransaction) return this.transformRawResult(await ctx.raw(bound?.sql ?? sql, bound?.bindings ?? []), method);
      return this.executeQuery(
        sql,
        async () => {
          const query = bound ? this.getKnex().raw(bound.sql, bound.bindings as never[]) : this.getKnex().raw(sql);
          if (ctx) query.transacting(ctx as never);
          return this.transformRawResult(await query, method);
        },
        { query: sql, params: values as unknown[], ...loggerContext },
      );
    }
  }
  return Bound;
}

export class BoundPostgreSqlConnection extends bindingParameters(PostgreSqlConnection) {}

export class BoundPostgreSqlDriver extends AbstractSqlDriver<BoundPostgreSqlConnection> {
  constructor(config: Configuration) {
    super(config, new PostgreSqlPlatform(), BoundPostgreSqlConnection, ['knex', 'pg']);
  }
}
