import { Migration0001Foundation } from './0001-foundation.ts';
import { Migration0002Identity } from './0002-identity.ts';
import { Migration0005Generations } from './0005-generations.ts';
import { Migration0006Assets } from './0006-assets.ts';
import { Migration0007Webhooks } from './0007-webhooks.ts';
import { Migration0008Money } from './0008-money.ts';
import { Migration0009Reservations } from './0009-reservations.ts';
import { Migration0010Attempts } from './0010-attempts.ts';
import { Migration0011Cluster } from './0011-cluster.ts';
import { Migration0012UsageRollups } from './0012-usage-rollups.ts';
import { Migration0013UnfinishedIndexes } from './0013-unfinished-indexes.ts';
import { Migration0014KeyLimits } from './0014-key-limits.ts';
import { Migration0015WebhookOperations } from './0015-webhook-operations.ts';
import { Migration0016WebhookSigning } from './0016-webhook-signing.ts';
import { Migration0017TraceContext } from './0017-trace-context.ts';
import { Migration0018SessionExpiry } from './0018-session-expiry.ts';
import { Migration0019WriteChecks } from './0019-write-checks.ts';
import { Migration0020CatalogPricing } from './0020-catalog-pricing.ts';
import { Migration0021ProviderJobIndex } from './0021-provider-job-index.ts';
import { Migration0022UsageSeries } from './0022-usage-series.ts';
import { Migration0023BudgetAlerts } from './0023-budget-alerts.ts';
import { Migration0024GenerationCharge } from './0024-generation-charge.ts';
import type { Migration } from '@mikro-orm/migrations';
import { MIGRATION_NAMES, type MigrationName } from './names.ts';

const classes: Record<MigrationName, new (...args: any[]) => Migration> = {
  '0001-foundation': Migration0001Foundation,
  '0002-identity': Migration0002Identity,
  '0005-generations': Migration0005Generations,
  '0006-assets': Migration0006Assets,
  '0007-webhooks': Migration0007Webhooks,
  '0008-money': Migration0008Money,
  '0009-reservations': Migration0009Reservations,
  '0010-attempts': Migration0010Attempts,
  '0011-cluster': Migration0011Cluster,
  '0012-usage-rollups': Migration0012UsageRollups,
  '0013-unfinished-indexes': Migration0013UnfinishedIndexes,
  '0014-key-limits': Migration0014KeyLimits,
  '0015-webhook-operations': Migration0015WebhookOperations,
  '0016-webhook-signing': Migration0016WebhookSigning,
  '0017-trace-context': Migration0017TraceContext,
  '0018-session-expiry': Migration0018SessionExpiry,
  '0019-write-checks': Migration0019WriteChecks,
  '0020-catalog-pricing': Migration0020CatalogPricing,
  '0021-provider-job-index': Migration0021ProviderJobIndex,
  '0022-usage-series': Migration0022UsageSeries,
  '0023-budget-alerts': Migration0023BudgetAlerts,
  '0024-generation-charge': Migration0024GenerationCharge,
};

/** Applied in the order of MIGRATION_NAMES at start-up, when one is missing from the database. */
export const migrations = MIGRATION_NAMES.map((name) => ({ name, class: classes[name] }));
