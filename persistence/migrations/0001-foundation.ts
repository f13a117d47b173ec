import { Migration } from '@mikro-orm/migrations';

export class Migration0001Foundation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table actor_snapshots (
        kind text not null,
        id text not null,
        version integer not null,
        state jsonb not null,
        updated_at timestamptz not null,
        primary key (kind, id)
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists actor_snapshots');
  }
}
