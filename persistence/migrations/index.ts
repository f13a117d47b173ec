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

/** Applied in this order at start-up; a migration, once landed, is never edited, only followed. */
export const migrations = [
  { name: '0001-foundation', class: Migration0001Foundation },
  { name: '0002-identity', class: Migration0002Identity },
  { name: '0005-generations', class: Migration0005Generations },
  { name: '0006-assets', class: Migration0006Assets },
  { name: '0007-webhooks', class: Migration0007Webhooks },
  { name: '0008-money', class: Migration0008Money },
  { name: '0009-reservations', class: Migration0009Reservations },
  { name: '0010-attempts', class: Migration0010Attempts },
  { name: '0011-cluster', class: Migration0011Cluster },
  { name: '0012-usage-rollups', class: Migration0012UsageRollups },
  { name: '0013-unfinished-indexes', class: Migration0013UnfinishedIndexes },
  { name: '0014-key-limits', class: Migration0014KeyLimits },
  { name: '0015-webhook-operations', class: Migration0015WebhookOperations },
  { name: '0016-webhook-signing', class: Migration0016WebhookSigning },
  { name: '0017-trace-context', class: Migration0017TraceContext },
];
