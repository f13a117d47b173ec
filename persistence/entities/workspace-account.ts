import { EntitySchema } from '@mikro-orm/core';

/** A workspace's balances; the workspace actor is its only writer, always with the ledger entries that explain it. */
export interface WorkspaceAccountRow {
  workspaceId: string;
  availableCredits: number;
  reservedCredits: number;
  walletCents: number;
  reservedWalletCents: number;
  walletActivated: boolean;
  updatedAt: Date;
}

export const WorkspaceAccountEntity = new EntitySchema<WorkspaceAccountRow>({
  name: 'WorkspaceAccount',
  tableName: 'workspace_accounts',
  properties: {
    workspaceId: { type: 'string', primary: true, fieldName: 'workspace_id' },
    availableCredits: { type: 'integer', fieldName: 'available_credits' },
    reservedCredits: { type: 'integer', fieldName: 'reserved_credits' },
    walletCents: { type: 'integer', fieldName: 'wallet_cents' },
    reservedWalletCents: { type: 'integer', fieldName: 'reserved_wallet_cents' },
    walletActivated: { type: 'boolean', fieldName: 'wallet_activated' },
    updatedAt: { type: 'Date', fieldName: 'updated_at' },
  },
});

export interface CreditLedgerRow {
  id: string;
  workspaceId: string;
  kind: string;
  credits: number;
  reservedCredits: number;
  walletCents: number;
  reservedWalletCents: number;
  generationId: string | null;
  reference: string | null;
  createdAt: Date;
}

export const CreditLedgerEntity = new EntitySchema<CreditLedgerRow>({
  name: 'CreditLedger',
  tableName: 'credit_ledger',
  properties: {
    id: { type: 'string', primary: true },
    workspaceId: { type: 'string', fieldName: 'workspace_id' },
    kind: { type: 'string' },
    credits: { type: 'integer' },
    reservedCredits: { type: 'integer', fieldName: 'reserved_credits' },
    walletCents: { type: 'integer', fieldName: 'wallet_cents' },
    reservedWalletCents: { type: 'integer', fieldName: 'reserved_wallet_cents' },
    generationId: { type: 'string', fieldName: 'generation_id', nullable: true },
    reference: { type: 'string', nullable: true },
    createdAt: { type: 'Date', fieldName: 'created_at' },
  },
});

export interface IdempotencyKeyRow {
  workspaceId: string;
  key: string;
  requestHash: string;
  responseStatus: number;
  responseBody: unknown;
  createdAt: Date;
  expiresAt: Date;
}

export const IdempotencyKeyEntity = new EntitySchema<IdempotencyKeyRow>({
  name: 'IdempotencyKey',
  tableName: 'idempotency_keys',
  properties: {
    workspaceId: { type: 'string', primary: true, fieldName: 'workspace_id' },
    key: { type: 'string', primary: true },
    requestHash: { type: 'string', fieldName: 'request_hash' },
    responseStatus: { type: 'integer', fieldName: 'response_status' },
    responseBody: { type: 'json', fieldName: 'response_body' },
    createdAt: { type: 'Date', fieldName: 'created_at' },
    expiresAt: { type: 'Date', fieldName: 'expires_at' },
  },
});

export interface ServiceSwitchRow {
  name: string;
  enabled: boolean;
  reason: string | null;
  changedAt: Date;
}

export const ServiceSwitchEntity = new EntitySchema<ServiceSwitchRow>({
  name: 'ServiceSwitch',
  tableName: 'service_switches',
  properties: {
    name: { type: 'string', primary: true },
    enabled: { type: 'boolean' },
    reason: { type: 'string', nullable: true },
    changedAt: { type: 'Date', fieldName: 'changed_at' },
  },
});
