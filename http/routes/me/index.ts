import type { RouteDef } from '../../route.ts';
import { getMe } from './get.ts';
import { updateMe } from './update.ts';
import { deleteMe } from './delete.ts';
import { changePassword } from './change-password.ts';
import { requestExport } from './export-request.ts';
import { downloadExport } from './export-download.ts';
import { listLinkedAccounts } from './accounts-list.ts';
import { unlinkAccount } from './accounts-unlink.ts';

/** The signed-in user's account (docs/auth-and-keys.md, Account), plus the export download. */
export const accountRoutes: RouteDef[] = [getMe, updateMe, deleteMe, changePassword, requestExport, downloadExport, listLinkedAccounts, unlinkAccount];
