import path from 'node:path';
import type { Config } from '../../runtime/config.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CleanupStack } from '../../runtime/cleanup-stack.ts';
import { ServiceSwitches } from '../../runtime/switches.ts';
import type { Database } from '../../persistence/database.ts';
import { createBlobStore, type BlobStore } from '../../persistence/blob-store/index.ts';
import { loadOrCreateSecret } from '../../persistence/secret-file.ts';
import { SecretBox } from '../../persistence/secret-box.ts';
import { WEBHOOK_SECRET_PURPOSE } from '../../actors/webhook/deps.ts';
import { StartupError } from './startup-error.ts';

export interface Stores {
  blobs: BlobStore;
  billingSecret: Buffer;
  webhookSecrets: SecretBox;
}

/**
 * The secrets (each configured, or generated once and kept under DATA_DIR) and the blob store. The local
 * blob store's URLs point at the service: `publicUrl` is read when one is made (with PORT=0 the address is
 * known only once listening).
 */
export async function buildStores(stack: CleanupStack, config: Config, clock: Clock, publicUrl: () => string): Promise<Stores> {
  try {
    const billingSecret = await loadOrCreateSecret(config.billing.signingSecret, config.dataDir, {
      file: 'billing-signing-secret',
      envName: 'BILLING_SIGNING_SECRET',
    });
    const webhookSecrets = new SecretBox(
      await loadOrCreateSecret(config.webhooks.secretKey, config.dataDir, { file: 'webhook-secret-key', envName: 'WEBHOOK_SECRET_KEY' }),
      WEBHOOK_SECRET_PURPOSE,
    );
    const blobs = await createBlobStore(
      config.blobStore.kind === 's3'
        ? config.blobStore
        : { kind: 'local', dataDir: config.dataDir, baseUrl: publicUrl, signingSecret: config.blobStore.signingSecret },
      () => clock.now(),
    );
    stack.defer(() => blobs.close());
    return { blobs, billingSecret, webhookSecrets };
  } catch (error) {
    throw new StartupError(`blob store, billing secret or webhook secret key: ${(error as Error).message}`);
  }
}

/** The emergency stop; on PGlite on disk the ops command reaches this server through <DATA_DIR>/ops. */
export async function buildSwitches(stack: CleanupStack, config: Config, db: Database, clock: Clock, logger: Logger): Promise<ServiceSwitches> {
  const switches = new ServiceSwitches({
    db,
    clock,
    logger,
    mailboxDir: db.kind === 'pglite' && config.databaseUrl !== 'memory://' ? path.join(config.dataDir, 'ops') : undefined,
  });
  // Registered before it starts: a start that fails half-way has its mailbox claim taken back.
  stack.defer(() => switches.stop());
  await switches.start();
  return switches;
}
