import { defineRoute } from '../../route.ts';
import { newId } from '../../../persistence/ids.ts';
import { insertExport, type ExportRequest } from '../../../persistence/stores/identity.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from '../workspaces/access.ts';
import { buildExport, writeExportFile } from './export-file.ts';
import { ExportOut, toExportOut } from './shapes.ts';

export const requestExport = defineRoute({
  method: 'POST',
  path: '/v1/me/export-request',
  operationId: 'requestDataExport',
  summary: "Export the signed-in user's data as a JSON file; the answer names its download path",
  description:
    "Exports the signed-in user's data (profile, memberships, sign-in methods, sessions, invitations sent, keys created) as a JSON file; the answer names its download path.",
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  keyWorkspace: 'none',
  responses: { 201: ExportOut },
  handler: async ({ auth, services }) => {
    const { userId } = requireSession(auth, 'export user data');
    const unit = openUnit(services.db);
    const now = services.clock.now();
    const id = newId('exp', now);
    // A user's data is small: the file is made within the request, so the answer is already complete.
    // File first, row second: a crash in between leaves only an orphan file, never a row without its file.
    const document = await buildExport(unit, userId, now);
    const text = `${JSON.stringify(document, null, 2)}\n`;
    const filePath = await writeExportFile(services.config.dataDir, id, text);
    const request: ExportRequest = {
      id,
      userId,
      status: 'completed',
      filePath,
      bytes: Buffer.byteLength(text),
      createdAt: new Date(now),
      completedAt: new Date(services.clock.now()),
    };
    await insertExport(unit, request);
    return { status: 201, body: toExportOut(request) };
  },
});
