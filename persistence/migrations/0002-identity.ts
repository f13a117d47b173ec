import { Migration } from '@mikro-orm/migrations';

/** Users, sessions, workspaces, members, invitations, API keys and their usage, linked accounts, exports. */
export class Migration0002Identity extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table users (
        id text primary key,
        email text not null,
        name text not null,
        password_hash text,
        created_at timestamptz not null,
        updated_at timestamptz not null
      )`);
    this.addSql('create unique index users_email_key on users (lower(email))');

    this.addSql(`
      create table linked_accounts (
        user_id text not null references users (id) on delete cascade,
        provider text not null,
        provider_account_id text not null,
        created_at timestamptz not null,
        primary key (user_id, provider)
      )`);
    this.addSql('create unique index linked_accounts_provider_key on linked_accounts (provider, provider_account_id)');

    this.addSql(`
      create table sessions (
        id text primary key,
        user_id text not null references users (id) on delete cascade,
        token_hash text not null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        last_seen_at timestamptz not null,
        ip text,
        user_agent text
      )`);
    this.addSql('create unique index sessions_token_hash_key on sessions (token_hash)');
    this.addSql('create index sessions_user_idx on sessions (user_id)');

    this.addSql(`
      create table workspaces (
        id text primary key,
        name text not null,
        plan text not null default 'free',
        personal boolean not null default false,
        created_at timestamptz not null,
        updated_at timestamptz not null
      )`);

    this.addSql(`
      create table workspace_members (
        workspace_id text not null references workspaces (id) on delete cascade,
        user_id text not null references users (id) on delete cascade,
        role text not null check (role in ('owner', 'admin', 'member')),
        created_at timestamptz not null,
        primary key (workspace_id, user_id)
      )`);
    this.addSql('create index workspace_members_user_idx on workspace_members (user_id)');
    this.addSql(`create unique index workspace_members_one_owner on workspace_members (workspace_id) where role = 'owner'`);

    this.addSql(`
      create table invitations (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        email text not null,
        role text not null check (role in ('admin', 'member')),
        token_hash text not null,
        status text not null check (status in ('pending', 'accepted', 'cancelled')),
        invited_by text references users (id) on delete set null,
        created_at timestamptz not null,
        expires_at timestamptz not null,
        accepted_at timestamptz,
        accepted_by text references users (id) on delete set null
      )`);
    this.addSql('create unique index invitations_token_hash_key on invitations (token_hash)');
    this.addSql(`create unique index invitations_pending_email on invitations (workspace_id, lower(email)) where status = 'pending'`);

    this.addSql(`
      create table api_keys (
        id text primary key,
        workspace_id text not null references workspaces (id) on delete cascade,
        created_by text references users (id) on delete set null,
        name text not null,
        prefix text not null,
        key_hash text not null,
        scopes jsonb not null,
        expires_at timestamptz,
        revoked_at timestamptz,
        last_used_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      )`);
    this.addSql('create unique index api_keys_key_hash_key on api_keys (key_hash)');
    this.addSql('create index api_keys_workspace_idx on api_keys (workspace_id, created_at desc, id desc)');

    this.addSql(`
      create table api_key_usage (
        key_id text not null references api_keys (id) on delete cascade,
        day date not null,
        requests bigint not null default 0,
        generations bigint not null default 0,
        primary key (key_id, day)
      )`);

    this.addSql(`
      create table export_requests (
        id text primary key,
        user_id text not null references users (id) on delete cascade,
        status text not null,
        file_path text,
        bytes bigint,
        created_at timestamptz not null,
        completed_at timestamptz
      )`);
    this.addSql('create index export_requests_user_idx on export_requests (user_id, created_at desc)');
  }

  override async down(): Promise<void> {
    for (const table of [
      'export_requests',
      'api_key_usage',
      'api_keys',
      'invitations',
      'workspace_members',
      'workspaces',
      'sessions',
      'linked_accounts',
      'users',
    ]) {
      this.addSql(`drop table if exists ${table}`);
    }
  }
}
