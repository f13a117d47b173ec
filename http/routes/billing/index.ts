import type { RouteDef } from '../../route.ts';
import { createCheckout } from './checkout.ts';
import { getSubscription } from './subscription.ts';
import { listPayments } from './payments-list.ts';
import { createPortalSession, showLocalPortal } from './portal.ts';
import { cancelSubscription } from './cancel.ts';
import { receiveProviderEvent } from './events.ts';
import { declineLocalCheckout, payLocalCheckout, showLocalCheckout } from './local-checkout.ts';

/** Billing (docs/money.md), the provider's event endpoint, and the local provider's own pages. */
export const billingRoutes: RouteDef[] = [
  createCheckout,
  getSubscription,
  listPayments,
  createPortalSession,
  cancelSubscription,
  receiveProviderEvent,
  showLocalCheckout,
  payLocalCheckout,
  declineLocalCheckout,
  showLocalPortal,
];
