import type { RouteDef } from '../../route.ts';
import { getWorkspaceCredits } from './get.ts';
import { createCreditTopUp } from './top-ups-create.ts';
import { listCreditTopUps } from './top-ups-list.ts';

export const creditRoutes: RouteDef[] = [getWorkspaceCredits, createCreditTopUp, listCreditTopUps];
