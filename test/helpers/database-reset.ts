/**
 * What the suite's pools of databases (pglite-pool.ts, postgres-pool.ts) use to hand a database used by
 * one server to the next as a fresh one: the statements that empty it, and a digest of everything an
 * emptying would not undo, compared with the digest of a fresh one.
 */

/** The service's tables (every one but the migrations' own), quoted, for `emptyingSql`. */
export const TABLES_SQL = `select quote_ident(c.relname) as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
  where n.nspname = 'public' and c.relkind in ('r', 'p') and c.relname <> 'mikro_orm_migrations' order by c.relname`;

/**
 * Deletes every row of `tables`. Foreign keys are triggers: with the replica role (a superuser's setting)
 * none fires, so the order of the deletes does not matter. DELETE, not TRUNCATE: on empty or small
 * tables it costs a few milliseconds where TRUNCATE makes new files for each table and index.
 */
export function emptyingSql(tables: string[]): string {
  return `SET session_replication_role = replica; ${tables.map((t) => `DELETE FROM public.${t};`).join(' ')} RESET session_replication_role;`;
}

/**
 * One digest of what a test could change and an emptying would not undo: relations and their columns,
 * constraints, indexes, triggers, rules, policies, functions, types, extensions, the database's settings,
 * the session's, planner statistics, the migrations recorded and the sequences' values; with
 * `wholeServer` (PGlite, one database to itself), roles and databases too. Run with the search path set to
 * pg_catalog only, so that every name is printed with its schema.
 */
export function fingerprintSql(wholeServer: boolean): string {
  return `
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
  union all select format('rule %s %s', ev_class::regclass, rulename) from pg_rewrite where ev_class in (select oid from pg_class where relnamespace in (select oid from own) and relkind <> 'v')
  union all select format('policy %s %s', polrelid::regclass, polname) from pg_policy
  union all select format('fn %s %s', p.oid::regprocedure, md5(p.prosrc)) from pg_proc p where p.pronamespace in (select oid from own)
  union all select format('type %s', t.oid::regtype) from pg_type t where t.typnamespace in (select oid from own) and t.typrelid = 0
  union all select format('ext %s %s', extname, extversion) from pg_extension
  union all select format('set %s', setconfig) from pg_db_role_setting where setdatabase in (0, (select oid from pg_database where datname = current_database()))
  union all select format('guc %s %s', name, setting) from pg_settings where source = 'session' and name <> 'search_path'
  union all select format('stat %s', count(*)) from pg_statistic where starelid in (select oid from pg_class where relnamespace in (select oid from own))
  union all select format('mig %s %s', count(*), max(name)) from public.mikro_orm_migrations
  union all select format('seq %s %s', c.relname, pg_sequence_last_value(c.oid)) from pg_class c where c.relkind = 'S' and c.relnamespace in (select oid from own)
  ${
    wholeServer
      ? `union all select format('role %s %s', rolname, rolsuper) from pg_roles
  union all select format('db %s', datname) from pg_database`
      : ''
  }
) parts`;
}
