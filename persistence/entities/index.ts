import { ActorSnapshotEntity } from './actor-snapshot.ts';
import { UserEntity } from './user.ts';
import { LinkedAccountEntity } from './linked-account.ts';
import { SessionEntity } from './session.ts';
import { WorkspaceEntity } from './workspace.ts';
import { WorkspaceMemberEntity } from './workspace-member.ts';
import { ApiKeyEntity } from './api-key.ts';
import { ApiKeyUsageEntity } from './api-key-usage.ts';
import { InvitationEntity } from './invitation.ts';
import { ExportRequestEntity } from './export-request.ts';
import { GenerationEntity } from './generation.ts';
import { WorkspaceAccountEntity, CreditLedgerEntity, IdempotencyKeyEntity, ServiceSwitchEntity } from './workspace-account.ts';
import { AssetEntity } from './asset.ts';
import { UploadEntity } from './upload.ts';
import { WebhookDeliveryEntity, WebhookEndpointEntity } from './webhook.ts';

/** Every entity the ORM knows; each issue adds its own here. */
export const entities = [
  ActorSnapshotEntity,
  UserEntity,
  LinkedAccountEntity,
  SessionEntity,
  WorkspaceEntity,
  WorkspaceMemberEntity,
  ApiKeyEntity,
  ApiKeyUsageEntity,
  InvitationEntity,
  ExportRequestEntity,
  GenerationEntity,
  WorkspaceAccountEntity,
  CreditLedgerEntity,
  IdempotencyKeyEntity,
  ServiceSwitchEntity,
  AssetEntity,
  UploadEntity,
  WebhookEndpointEntity,
  WebhookDeliveryEntity,
];
