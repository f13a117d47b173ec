import { Migration } from '@mikro-orm/migrations';

/**
 * A provider's event names its job by the provider's id (a Replicate prediction, a fal request): the jobs at
 * a provider are found by it. Only jobs submitted or running are indexed, so the index holds the work in
 * flight, not the history.
 */
export class Migration0021ProviderJobIndex extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index generations_provider_job on generations (provider_job_id) where status in ('submitted', 'running')`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists generations_provider_job');
  }
}
