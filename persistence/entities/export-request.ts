import { EntitySchema } from '@mikro-orm/core';

export type ExportStatus = 'pending' | 'completed' | 'failed';

/** A user's request for a copy of their data; the file lives under `${dataDir}/exports/`. */
export interface ExportRequest {
  id: string;
  userId: string;
  status: ExportStatus;
  /** Relative to the data directory, so the directory can move. */
  filePath: string | null;
  bytes: number | null;
  createdAt: Date;
  completedAt: Date | null;
}

export const ExportRequestEntity = new EntitySchema<ExportRequest>({
  name: 'ExportRequest',
  tableName: 'export_requests',
  properties: {
    id: { type: 'string', primary: true },
    userId: { type: 'string', fieldName: 'user_id' },
    status: { type: 'string' },
    filePath: { type: 'string', fieldName: 'file_path', nullable: true },
    // bigint column; exports are far below 2^53 bytes, so a number is exact.
    bytes: { type: 'integer', columnType: 'bigint', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    completedAt: { type: 'Date', fieldName: 'completed_at', nullable: true },
  },
});
