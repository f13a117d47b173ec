import { Migration } from '@mikro-orm/migrations';

/** `sessions` by expiry: the periodic purge of expired sessions reads them oldest first, without a scan of the table. */
export class Migration0018SessionExpiry extends Migration {
  override async up(): Promise<void> {
    this.addSql('create index sessions_expiry_idx on sessions (expires_at)');
  }
}
