import { AbstractSqlDriver, PostgreSqlPlatform, type Configuration } from '@mikro-orm/postgresql';
import { PGliteConnection } from 'mikro-orm-pglite';
import { bindingParameters } from './bound-connection.ts';

/**
 * The embedded database's driver, with its statements' values bound as driver parameters (bound-connection.ts).
 * A module of its own: database.ts loads it, and PGlite, only when the database is PGlite.
 */
export class BoundPGliteConnection extends bindingParameters(PGliteConnection) {}

export class BoundPGliteDriver extends AbstractSqlDriver<BoundPGliteConnection> {
  constructor(config: Configuration) {
    super(config, new PostgreSqlPlatform(), BoundPGliteConnection, ['knex', '@electric-sql/pglite', '@harryplusplus/knex-pglite']);
  }
}
