import type { RouteDef } from '../../route.ts';
import { receiveProviderJobEvent } from './events.ts';

/** What providers call: their events about the jobs of a deployment. */
export const providerRoutes: RouteDef[] = [receiveProviderJobEvent];
