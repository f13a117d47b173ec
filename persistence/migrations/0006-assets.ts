import { Migration } from '@mikro-orm/migrations';

/**
 * Assets (uploaded files and generation outputs), pending upload intents, and each workspace's storage
 * account. Storage use is kept as one row per workspace, changed in the transaction that adds or removes an
 * asset by a single conditional UPDATE (`used_bytes + n <= limit`): the row lock serialises concurrent
 * uploads and deletes of one workspace, so the figure is exact and never passes the plan's limit.
 */
export class Migration0006Assets extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table assets (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        media_type text not null check (media_type in ('image', 'video', 'audio')),
        content_type text not null,
        bytes bigint not null check (bytes >= 0),
        width integer,
        height integer,
        duration_seconds double precision,
        favorite boolean not null default false,
        name text,
        source_generation_id text,
        storage_key text not null,
        created_at timestamptz not null,
        updated_at timestamptz not null
      )`);
    this.addSql('create unique index assets_storage_key_key on assets (storage_key)');
    // One index per list filter, each ending in the keyset (created_at desc, id desc).
    this.addSql('create index assets_workspace_idx on assets (workspace_id, created_at desc, id desc)');
    this.addSql('create index assets_workspace_media_idx on assets (workspace_id, media_type, created_at desc, id desc)');
    this.addSql('create index assets_workspace_favorite_idx on assets (workspace_id, favorite, created_at desc, id desc)');
    this.addSql(`create index assets_workspace_generation_idx on assets (workspace_id, source_generation_id, created_at desc, id desc)
      where source_generation_id is not null`);

    this.addSql(`
      create table uploads (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        storage_key text not null,
        media_type text not null check (media_type in ('image', 'video', 'audio')),
        content_type text not null,
        bytes bigint not null check (bytes > 0),
        filename text not null,
        created_by text,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        completed_at timestamptz,
        asset_id text
      )`);
    this.addSql('create unique index uploads_storage_key_key on uploads (storage_key)');
    this.addSql('create index uploads_pending_idx on uploads (workspace_id, expires_at) where completed_at is null');

    this.addSql(`
      create table workspace_storage (
        workspace_id text primary key references workspaces (id) on delete cascade,
        used_bytes bigint not null default 0 check (used_bytes >= 0),
        image_count integer not null default 0 check (image_count >= 0),
        video_count integer not null default 0 check (video_count >= 0),
        audio_count integer not null default 0 check (audio_count >= 0),
        updated_at timestamptz not null default now()
      )`);
  }

  override async down(): Promise<void> {
    for (const table of ['workspace_storage', 'uploads', 'assets']) this.addSql(`drop table if exists ${table}`);
  }
}
