import { Migration } from '@mikro-orm/migrations';

/**
 * The catalog as data: a generation remembers the deployment it was created for (`deployment_id`) and, when
 * its model is priced per token, the price it was created with (`token_terms`) and the tokens its provider
 * reported (`usage`). A workspace's account keeps the fraction of a credit its token-priced jobs left
 * over (`token_carry_nano`, billionths of a credit), taken into its next charge (domain/catalog/pricing.ts).
 */
export class Migration0020CatalogPricing extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table generations add column deployment_id text, add column token_terms jsonb, add column usage jsonb');
    this.addSql('alter table workspace_accounts add column token_carry_nano bigint not null default 0');
  }

  override async down(): Promise<void> {
    this.addSql('alter table generations drop column deployment_id, drop column token_terms, drop column usage');
    this.addSql('alter table workspace_accounts drop column token_carry_nano');
  }
}
