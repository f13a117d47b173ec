import type { RouteDef } from '../../route.ts';
import { getEmergencyStop } from './emergency-stop.ts';
import { listGenerations } from './list.ts';
import { getGeneration } from './get.ts';

/** Generations (docs/generations.md): the reads and the emergency-stop state. */
export const generationReadRoutes: RouteDef[] = [getEmergencyStop, listGenerations, getGeneration];
