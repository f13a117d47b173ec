import type { RouteDef } from '../../route.ts';
import { listApiKeys } from './list.ts';
import { createApiKey } from './create.ts';
import { updateApiKey } from './update.ts';
import { deleteApiKey } from './delete.ts';
import { getApiKeyUsage } from './usage.ts';

/** API keys (docs/auth-and-keys.md, API keys): dashboard sessions only. */
export const apiKeyRoutes: RouteDef[] = [listApiKeys, createApiKey, updateApiKey, deleteApiKey, getApiKeyUsage];
