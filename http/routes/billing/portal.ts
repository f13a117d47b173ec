import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { moneyWorkspace } from './access.ts';
import { WorkspaceIdField } from './shapes.ts';
import { dollars, escapeHtml, htmlPage } from './html.ts';
import { activeSubscriptionTerms, latestPayments } from '../../../persistence/stores/payments.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

export const PortalOut = Type.Object(
  {
    url: Type.String({ description: "The provider's customer portal for this workspace; a session, valid until expiresAt." }),
    expiresAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const createPortalSession = defineRoute({
  method: 'POST',
  path: '/v1/billing/portal',
  operationId: 'createBillingPortalSession',
  summary: 'A customer billing portal session URL (payments, subscription)',
  description:
    'Answers the URL of a customer billing portal session, where payments and the subscription can be seen. Owners and admins when signed in; an API key needs wallet.write.',
  tags: ['billing'],
  access: 'auth',
  keys: { scopes: ['wallet.write'] },
  errors: ['not_found'],
  body: Type.Object({ workspaceId: WorkspaceIdField }, { additionalProperties: false }),
  responses: { 200: PortalOut },
  handler: async ({ auth, body, services }) => {
    const workspace = await moneyWorkspace(openUnit(services.db), auth, body.workspaceId, { action: 'manage billing', keyScopes: ['wallet.write'] });
    const session = services.billing.provider.portalUrl(workspace.id);
    return { body: { url: session.url, expiresAt: new Date(session.expiresAt).toISOString() } };
  },
});

export const showLocalPortal = defineRoute({
  method: 'GET',
  path: '/v1/billing/local/portal',
  operationId: 'showLocalPortal',
  summary: "The local payment provider's customer portal (HTML), reached through a signed portal session URL",
  description:
    'The customer portal page (HTML) of the built-in local payment provider, reached through a signed portal session URL; one that is not valid or has expired is 404.',
  tags: ['billing'],
  access: 'public',
  errors: ['not_found'],
  query: Type.Object(
    {
      workspaceId: WorkspaceIdField,
      expires: Type.String({ pattern: '^[0-9]{1,16}$' }),
      token: Type.String({ minLength: 64, maxLength: 64 }),
    },
    { additionalProperties: false },
  ),
  responses: { 200: null },
  handler: async ({ query, services }) => {
    const local = services.billing.local;
    if (!local?.verifyPortal(query.workspaceId, Number(query.expires), query.token))
      throw new ApiError('not_found', 'No such portal session, or it has expired.');
    const unit = openUnit(services.db);
    const subs = await activeSubscriptionTerms(unit, query.workspaceId);
    const payments = await latestPayments(unit, query.workspaceId);
    const sub = subs[0];
    const summary = sub
      ? `<p>Plan <strong>${escapeHtml(sub.plan)}</strong>, ${sub.cancel_at_period_end ? 'ends' : 'renews'} on ${new Date(sub.current_period_end).toISOString().slice(0, 10)}.</p>`
      : '<p>No paid subscription (free plan).</p>';
    const rows = payments
      .map(
        (p) =>
          `<tr><td>${new Date(p.created_at).toISOString().slice(0, 10)}</td><td>${escapeHtml(p.description)}</td><td>${dollars(Number(p.amount_cents))}</td><td>${escapeHtml(p.status)}</td></tr>`,
      )
      .join('');
    return htmlPage('Billing', `${summary}<table><tr><th>Date</th><th>What</th><th>Amount</th><th>Status</th></tr>${rows}</table>`);
  },
});
