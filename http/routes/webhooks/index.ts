import type { RouteDef } from '../../route.ts';
import { listWebhooks } from './list.ts';
import { createWebhook } from './create.ts';
import { updateWebhook } from './update.ts';
import { deleteWebhook } from './delete.ts';
import { listDeliveries } from './deliveries.ts';
import { rotateWebhookSecret } from './rotate-secret.ts';
import { testWebhook } from './test-event.ts';
import { resendDelivery } from './resend.ts';
import { recoverWebhook } from './recover.ts';
import { replayWebhookEvent } from './replay.ts';

/** Webhooks (docs/webhooks.md): scope webhooks.manage; sessions must be an owner or admin. */
export const webhookRoutes: RouteDef[] = [listWebhooks, createWebhook, updateWebhook, deleteWebhook, listDeliveries, rotateWebhookSecret, testWebhook];
/** Operations on deliveries and events (docs/webhooks.md "Resend", "Recover", "Replay"). */
webhookRoutes.push(resendDelivery, recoverWebhook, replayWebhookEvent);
