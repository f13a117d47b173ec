import type { RouteDef } from '../route.ts';
import { getServiceIdentity } from './meta/root.ts';
import { getReadiness } from './meta/ready.ts';
import { getLiveness } from './meta/live.ts';
import { openApiRoute } from './meta/openapi.ts';
import { signup } from './auth/signup.ts';
import { login } from './auth/login.ts';
import { logout } from './auth/logout.ts';
import { apiKeyRoutes } from './api-keys/index.ts';
import { workspaceRoutes } from './workspaces/index.ts';
import { accountRoutes } from './me/index.ts';
import { fileRoutes } from './files/index.ts';
import { publicRoutes } from './public/index.ts';
import { modelRoutes } from './models/index.ts';
import { generationReadRoutes } from './generations/index.ts';
import { createGeneration } from './generations/create.ts';
import { createGenerationBatch } from './generations/create-batch.ts';
import { cancelGeneration } from './generations/cancel.ts';
import { creditRoutes } from './credits/index.ts';
import { walletRoutes } from './wallet/index.ts';
import { budgetRoutes } from './budgets/index.ts';
import { billingRoutes } from './billing/index.ts';
import { providerRoutes } from './providers/index.ts';
import { getUsage } from './usage/get.ts';
import { getUsageSeries } from './usage/series.ts';
import { webhookRoutes } from './webhooks/index.ts';
import { streamRoutes } from './streams/index.ts';
import { eventRoutes } from './events/index.ts';
import { listBreakers } from './breakers/list.ts';
import { openAiRoutes } from './openai/index.ts';
import { acceptWorkspaceField } from '../workspace-field.ts';

/** The route table: a route exists, is validated and is documented by being listed here. */
export function routeTable(extra: RouteDef[] = []): RouteDef[] {
  const routes: RouteDef[] = [
    getServiceIdentity,
    getReadiness,
    getLiveness,
    signup,
    login,
    logout,
    ...apiKeyRoutes,
    ...workspaceRoutes,
    ...accountRoutes,
    ...fileRoutes,
    ...publicRoutes,
    ...modelRoutes,
    ...generationReadRoutes,
    createGeneration,
    createGenerationBatch,
    cancelGeneration,
    ...creditRoutes,
    ...walletRoutes,
    ...budgetRoutes,
    ...billingRoutes,
    ...providerRoutes,
    getUsage,
    getUsageSeries,
    ...webhookRoutes,
    ...eventRoutes,
    listBreakers,
    ...streamRoutes,
    ...openAiRoutes,
    ...extra,
  ];
  const table = routes.map(acceptWorkspaceField);
  table.push(openApiRoute(() => table));
  return table;
}
