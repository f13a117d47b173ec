import { Migration } from '@mikro-orm/migrations';

/**
 * How a token-priced generation's charge was made, written with its settlement (docs/money.md, Why a job
 * cost that): the exact cost and the workspace's token carry before and after it, in billionths of a
 * credit, which nothing else keeps (the account holds the carry of now only). Null for other jobs, and for
 * those settled before this migration.
 */
export class Migration0024GenerationCharge extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table generations add column charge jsonb');
  }

  override async down(): Promise<void> {
    this.addSql('alter table generations drop column charge');
  }
}
