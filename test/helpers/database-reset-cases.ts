/** What the pools' own tests (test/unit/pglite-pool.test.ts, postgres-pool.test.ts) start from and change. */

/** A small migrated database: the migrations' table with one recorded, two tables joined by a foreign key. */
export const SMALL_MIGRATED_SCHEMA = `
  create table mikro_orm_migrations (id serial primary key, name text);
  insert into mikro_orm_migrations (name) values ('Migration0001');
  create table parents (id int primary key);
  create table children (id int primary key, parent int not null references parents (id));`;

/** Changes a test could make that emptying the tables would not undo: a database after any of them is not handed on. */
export const CHANGES_EMPTYING_KEEPS = [
  'create table extra (id int)',
  'alter table parents add column name text',
  `create function refuse() returns trigger language plpgsql as $$ begin raise exception 'no'; end $$;
   create trigger refuse before insert on parents for each row execute function refuse()`,
  `insert into mikro_orm_migrations (name) values ('Migration0002')`,
  'insert into parents select generate_series(1, 100); analyze parents',
];
