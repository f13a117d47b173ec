import pg from 'pg';
import { emptyingSql, fingerprintSql, TABLES_SQL } from './database-reset.ts';
import { eventually } from './eventually.ts';

/**
 * Databases on the test PostgreSQL server handed back when their test is done with them, emptied and
 * checked, for the next server of the same test process: a CREATE DATABASE from the migrated template and
 * its DROP cost the server some 0.5 s together (copying and logging every file of the template), an
 * emptying a few milliseconds. The PostgreSQL half of the suite starts a few hundred servers.
 *
 * What a test gets is what a copy of the template gives: every table of the service empty, the migrations'
 * own table as migrated, no session of an earlier test left on it (each is ended before the emptying). A
 * database whose schema, functions, triggers, settings, statistics or migrations differ afterwards from a
 * fresh copy's (a test that changed them; or one autovacuum analysed) is dropped instead, as is one that
 * could not be emptied (say, without a superuser's right to set session_replication_role).
 */
export class PostgresDatabasePool {
  private readonly idle: string[] = [];
  private image: Promise<{ fingerprint: string; emptying: string }> | undefined;

  /**
   * `create`: a new copy of the template, by name. `urlOf`: a database's URL on the server. `admin`: runs
   * work on a connection to the server's own database (for ending sessions and dropping).
   */
  constructor(
    private readonly create: () => Promise<string>,
    private readonly urlOf: (name: string) => string,
    private readonly admin: <T>(work: (client: pg.Client) => Promise<T>) => Promise<T>,
    private readonly keep = 2,
  ) {}

  /** A migrated database with nothing in it, by name; `giveBack` when the test is done with it. */
  async take(): Promise<string> {
    const reused = this.idle.pop();
    if (reused) return reused;
    const name = await this.create();
    // The first copy of the process is what every later one must look like.
    this.image ??= this.onDatabase(name, async (client) => {
      const tables = await client.query<{ name: string }>(TABLES_SQL);
      return { fingerprint: await fingerprintOf(client), emptying: emptyingSql(tables.rows.map((t) => t.name)) };
    });
    await this.image;
    return name;
  }

  /** Kept for the next `take` if it can be emptied back to a fresh copy, else dropped. */
  async giveBack(name: string): Promise<void> {
    // Room looked at again after the emptying: other tests may have given theirs back meanwhile.
    if (this.idle.length < this.keep && (await this.emptied(name)) && this.idle.length < this.keep) this.idle.push(name);
    else await this.admin((client) => client.query(`drop database if exists ${name} with (force)`));
  }

  /** How many are idle (for the pool's own test). */
  get idleCount(): number {
    return this.idle.length;
  }

  private async emptied(name: string): Promise<boolean> {
    try {
      const { fingerprint, emptying } = await this.image!;
      // Sessions left by the test (a killed child's, a pool not closed) are ended, as DROP … WITH (FORCE) would.
      await this.admin(async (client) => {
        const others = 'select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()';
        await client.query(`select pg_terminate_backend(pid) from (${others}) s`, [name]);
        await eventually(async () => (await client.query(others, [name])).rowCount === 0, { what: `the sessions on ${name} ended` });
      });
      return await this.onDatabase(name, async (client) => {
        await client.query(emptying);
        return (await fingerprintOf(client)) === fingerprint;
      });
    } catch {
      return false;
    }
  }

  private async onDatabase<T>(name: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: this.urlOf(name) });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  }
}

const FINGERPRINT = fingerprintSql(false);

async function fingerprintOf(client: pg.Client): Promise<string> {
  // Names printed schema and all, whatever the search path (set for this transaction only).
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL search_path = pg_catalog');
    return (await client.query<{ fingerprint: string }>(FINGERPRINT)).rows[0]!.fingerprint;
  } finally {
    await client.query('COMMIT');
  }
}
