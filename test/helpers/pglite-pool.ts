import type { PGlite } from '@electric-sql/pglite';

/**
 * In-memory PGlites handed back when their server closes them, emptied and checked, for the next server of
 * the same test process: a PGlite's boot from the migrated dump costs 1.2-2 s of CPU (docs/testing.md), an
 * emptying about 20 ms. A process runs many test files one after another (test/groups/), each starting
 * servers, so most of them would otherwise boot one.
 *
 * What a server gets is what a fresh boot from the dump gives: every table of the service empty, the
 * migrations' own table as migrated, no session state (DISCARD ALL: prepared statements, settings, temporary
 * tables, advisory locks, LISTEN; then the search path PGlite's start sets). An instance whose schema, functions, triggers, roles, statistics or
 * migrations differ afterwards from the dump's (a test that changed them, say a trigger that makes writes
 * fail) is closed instead, as is one that could not be emptied.
 */
export class PglitePool {
  private readonly idle: PGlite[] = [];
  private image: Promise<{ fingerprint: string; emptying: string }> | undefined;

  /** `boot`: a new PGlite loaded from the migrated dump. `keep`: how many idle instances to hold at most. */
  constructor(
    private readonly boot: () => Promise<PGlite>,
    private readonly keep = 2,
  ) {}

  /** A migrated PGlite with nothing in it; its close() empties it and hands it back here. */
  async take(): Promise<PGlite> {
    let instance = this.idle.pop();
    if (!instance) {
      instance = await this.boot();
      await instance.waitReady;
      // The first boot of the process is what every later one must look like.
      this.image ??= imageOf(instance);
      await this.image;
    }
    this.lend(instance);
    return instance;
  }

  /** How many are idle (for the pool's own test). */
  get idleCount(): number {
    return this.idle.length;
  }

  private lend(instance: PGlite): void {
    const own = instance as PGlite & { close: PGlite['close'] };
    own.close = async () => {
      // Its own close again (the prototype's), for the next borrower and for a real close.
      delete (own as Partial<typeof own>).close;
      if (this.idle.length < this.keep && (await this.emptied(instance))) this.idle.push(instance);
      else await instance.close();
    };
  }

  private async emptied(instance: PGlite): Promise<boolean> {
    // WebAssembly memory only grows: one a heavy test made large is let go rather than kept.
    if (instance.closed || heapBytes(instance) > MAX_KEPT_HEAP) return false;
    try {
      const { fingerprint, emptying } = await this.image!;
      // A transaction left open (a warning, not an error, when there is none).
      await instance.exec('ROLLBACK');
      // DISCARD ALL resets the search path to PGlite's command line (pg_catalog): its start sets public.
      await instance.exec('DISCARD ALL');
      await instance.exec('SET search_path TO public');
      await instance.exec(emptying);
      return (await fingerprintOf(instance)) === fingerprint;
    } catch {
      return false;
    }
  }
}

/** The largest WebAssembly heap kept idle: a fresh one is about 180 MB. */
const MAX_KEPT_HEAP = 512 * 1024 * 1024;

function heapBytes(instance: PGlite): number {
  return (instance as PGlite & { mod?: { HEAPU8?: Uint8Array } }).mod?.HEAPU8?.byteLength ?? 0;
}

/** What a fresh boot looks like, and the statements that bring a used instance back to it. */
async function imageOf(instance: PGlite): Promise<{ fingerprint: string; emptying: string }> {
  const tables = await instance.query<{ name: string }>(
    `select quote_ident(c.relname) as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and c.relkind in ('r', 'p') and c.relname <> 'mikro_orm_migrations' order by c.relname`,
  );
  // Foreign keys are triggers: with the replica role none fires, so the order of the deletes does not matter.
  const emptying = `SET session_replication_role = replica; ${tables.rows.map((t) => `DELETE FROM public.${t.name};`).join(' ')} RESET session_replication_role;`;
  return { fingerprint: await fingerprintOf(instance), emptying };
}

/**
 * One digest of everything a test could change and an emptying would not undo: relations and their
 * columns, constraints, indexes, triggers, functions, types, extensions, roles, databases, settings,
 * statistics, the migrations recorded and the sequences' values.
 */
const FINGERPRINT = `
with own as (select oid from pg_namespace where nspname not like 'pg\\_%' and nspname <> 'information_schema')
select md5(string_agg(x, E'\\n' order by x)) as fingerprint from (
  select format('rel %s.%s %s %s', c.relnamespace::regnamespace, c.relname, c.relkind,
         (select string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''), ', ' order by a.attnum)
            from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
           where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped)) as x
    from pg_class c where c.relnamespace in (select oid from own)
  union all select format('con %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) from pg_constraint where connamespace in (select oid from own)
  union all select format('idx %s', pg_get_indexdef(indexrelid)) from pg_index where indrelid in (select oid from pg_class where relnamespace in (select oid from own))
  union all select format('trg %s %s %s', tgrelid::regclass, tgname, tgenabled) from pg_trigger where not tgisinternal
  union all select format('fn %s %s', p.oid::regprocedure, md5(p.prosrc)) from pg_proc p where p.pronamespace in (select oid from own)
  union all select format('type %s', t.oid::regtype) from pg_type t where t.typnamespace in (select oid from own) and t.typrelid = 0
  union all select format('ext %s %s', extname, extversion) from pg_extension
  union all select format('role %s %s', rolname, rolsuper) from pg_roles
  union all select format('db %s', datname) from pg_database
  union all select format('set %s %s', setdatabase, setconfig) from pg_db_role_setting
  union all select format('guc %s %s', name, setting) from pg_settings where source = 'session' and name <> 'search_path'
  union all select format('stat %s', count(*)) from pg_statistic where starelid in (select oid from pg_class where relnamespace in (select oid from own))
  union all select format('mig %s %s', count(*), max(name)) from public.mikro_orm_migrations
  union all select format('rule %s %s', ev_class::regclass, rulename) from pg_rewrite where ev_class in (select oid from pg_class where relnamespace in (select oid from own) and relkind <> 'v')
  union all select format('policy %s %s', polrelid::regclass, polname) from pg_policy
  union all select format('seq %s %s', c.relname, pg_sequence_last_value(c.oid)) from pg_class c where c.relkind = 'S' and c.relnamespace in (select oid from own)
) parts`;

async function fingerprintOf(instance: PGlite): Promise<string> {
  // Names printed schema and all, whatever the search path (set for this transaction only).
  return instance.transaction(async (tx) => {
    await tx.exec('SET LOCAL search_path = pg_catalog');
    const { rows } = await tx.query<{ fingerprint: string }>(FINGERPRINT);
    return rows[0]!.fingerprint;
  });
}
