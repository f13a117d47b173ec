import type { RouteDef } from '../../route.ts';
import { listPlans } from './plans.ts';
import { listPublicModels } from './models.ts';
import { getPublicCatalog } from './catalog.ts';
import { getPublicStats } from './stats.ts';

/** The public endpoints (docs/generations.md, Public endpoints), no authentication: plans, models, catalog, stats. */
export const publicRoutes: RouteDef[] = [listPlans, listPublicModels, getPublicCatalog, getPublicStats];
