import { defineRoute } from '../../route.ts';
import { clearedSessionCookie, endSession } from '../../auth/sessions.ts';

export const logout = defineRoute({
  method: 'POST',
  path: '/v1/auth/logout',
  operationId: 'logout',
  summary: 'End the current session: it is deleted, so its cookie never works again',
  description:
    'Ends the session whose cookie is sent: the session is deleted on the server, so the cookie never works again, and the answer clears it. For dashboard sessions only; an API key is 403.',
  tags: ['auth'],
  access: 'dashboard',
  keyWorkspace: 'none',
  responses: { 204: null },
  handler: async ({ auth, services }) => {
    if (auth?.kind === 'session') await endSession(services, auth.sessionId);
    return { status: 204, headers: { 'Set-Cookie': clearedSessionCookie(services.config) } };
  },
});
