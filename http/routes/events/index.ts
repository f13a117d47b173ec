import type { RouteDef } from '../../route.ts';
import { listEvents } from './list.ts';

/** The workspace's emitted webhook events (docs/webhooks.md "Events"); replay is POST /v1/webhooks/:id/replay. */
export const eventRoutes: RouteDef[] = [listEvents];
