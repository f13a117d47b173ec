import type { RouteDef } from '../../route.ts';
import { listWebhooks } from './list.ts';
import { createWebhook } from './create.ts';
import { updateWebhook } from './update.ts';
import { deleteWebhook } from './delete.ts';
import { listDeliveries } from './deliveries.ts';
import { rotateWebhookSecret } from './rotate-secret.ts';
import { testWebhook } from './test-event.ts';

/** Webhooks (SPEC.md section 4, "Webhooks"): scope webhooks.manage; sessions must be an owner or admin. */
export const webhookRoutes: RouteDef[] = [listWebhooks, createWebhook, updateWebhook, deleteWebhook, listDeliveries, rotateWebhookSecret, testWebhook];
