import { Migration } from '@mikro-orm/migrations';

/**
 * How many times each generation was handed to its provider. A job in flight when the service stopped
 * is handed over again after the restart, up to a limit (actors/generation/machine.ts, MAX_ATTEMPTS); the
 * count is committed before each hand-over, so a crash during one still counts it. Jobs already past the
 * queue made one attempt.
 */
export class Migration0010Attempts extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table generations add column attempts integer not null default 0');
    this.addSql(
      `update generations set attempts = 1 where status in ('reserved', 'submitted', 'running') or provider_job_id is not null or started_at is not null`,
    );
  }

  override async down(): Promise<void> {
    this.addSql('alter table generations drop column attempts');
  }
}
