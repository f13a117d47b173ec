import type { RouteDef } from '../../route.ts';
import { listPlans } from './plans.ts';
import { listPublicModels } from './models.ts';
import { getPublicCatalog } from './catalog.ts';
import { getPublicStats } from './stats.ts';

/** The public endpoints of SPEC.md section 4 "Meta and public", no authentication: plans, models, catalog, stats. */
export const publicRoutes: RouteDef[] = [listPlans, listPublicModels, getPublicCatalog, getPublicStats];
