import type { RouteDef } from '../../route.ts';
import { getBudgets } from './get.ts';
import { updateBudgets } from './update.ts';

export const budgetRoutes: RouteDef[] = [getBudgets, updateBudgets];
