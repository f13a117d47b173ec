import fs from 'node:fs/promises';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { findExport } from '../../../persistence/stores/identity.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { requireSession } from '../workspaces/access.ts';
import { EXPORT_FORMAT, exportFilePath } from './export-file.ts';
import { ExportParams } from './shapes.ts';

const ExportDocument = Type.Object(
  { format: Type.Literal(EXPORT_FORMAT) },
  {
    additionalProperties: true,
    description: 'user, memberships, linkedAccounts, sessions, invitationsSent, apiKeysCreated, earlierExports; never a password, token or key hash.',
  },
);

export const downloadExport = defineRoute({
  method: 'GET',
  path: '/v1/me/exports/:exportId/download',
  operationId: 'downloadDataExport',
  summary: 'The JSON file of a data export, to the user who requested it only (404 for anyone else)',
  description: 'Downloads the JSON file of a data export, to the user who requested it only (404 for anyone else). An export with no file is 409.',
  tags: ['account'],
  access: 'auth',
  keys: 'refused',
  errors: ['conflict'],
  keyWorkspace: 'none',
  params: ExportParams,
  responses: { 200: ExportDocument },
  handler: async ({ auth, params, services }) => {
    const { userId } = requireSession(auth, 'download user data');
    const request = await findExport(openUnit(services.db), userId, params.exportId);
    if (!request) throw new ApiError('not_found', `No export ${params.exportId}.`);
    if (request.status !== 'completed' || !request.filePath) throw new ApiError('conflict', `Export ${request.id} is ${request.status}; it has no file.`);
    let text: string;
    try {
      text = await fs.readFile(exportFilePath(services.config.dataDir, request.filePath), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        throw new ApiError('not_found', `The file of export ${request.id} is no longer kept; request a new export.`);
      throw error;
    }
    return {
      raw: text,
      headers: { 'Content-Disposition': `attachment; filename="${request.id}.json"`, 'Cache-Control': 'no-store' },
    };
  },
});
