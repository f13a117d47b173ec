import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from './access.ts';
import { SubscriptionOut, toSubscriptionOut, WorkspaceIdField } from './shapes.ts';
import { namedWorkspace } from '../../owner.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const cancelSubscription = defineRoute({
  method: 'POST',
  path: '/v1/billing/cancel',
  operationId: 'cancelBillingSubscription',
  summary: 'Cancel the subscription at the end of its period: no renewal, the plan returns to free then; credits already granted stay',
  description:
    'Cancels the subscription at the end of its period: it does not renew and the plan returns to free then, while credits already granted stay. Owners and admins when signed in; an API key needs wallet.write. A workspace with no active subscription is 409.',
  tags: ['billing'],
  access: 'auth',
  keys: { scopes: ['wallet.write'] },
  errors: ['not_found', 'conflict'],
  owner: namedWorkspace,
  body: Type.Object({ workspaceId: WorkspaceIdField }, { additionalProperties: false }),
  responses: { 200: SubscriptionOut },
  handler: async ({ auth, body, services }) => {
    const workspace = await moneyWorkspace(openUnit(services.db), auth, body.workspaceId, { action: 'manage billing', keyScopes: ['wallet.write'] });
    const row = await services.actors.ask('ws', workspace.id, { type: 'cancel_subscription' });
    if (!row) throw new ApiError('conflict', 'The workspace has no active subscription to cancel.');
    return { body: toSubscriptionOut(row as unknown as Parameters<typeof toSubscriptionOut>[0]) };
  },
});
