import type { RouteDef } from '../../route.ts';
import { listModels } from './list.ts';

/** The plan-aware model catalog (generations.read). */
export const modelRoutes: RouteDef[] = [listModels];
