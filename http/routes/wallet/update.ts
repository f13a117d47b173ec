import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import type { WalletSettingsPatch } from '../../../actors/workspace/protocol.ts';
import { moneyWorkspace } from '../billing/access.ts';
import { WorkspaceIdField } from '../billing/shapes.ts';
import { toWalletOut, WalletOut } from './shapes.ts';
import { namedWorkspace } from '../../owner.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';

const Cents = Type.Integer({ minimum: 0, maximum: 100_000_000 });

export const WalletPatch = Type.Object(
  {
    workspaceId: WorkspaceIdField,
    autoRecharge: Type.Optional(
      Type.Object(
        {
          enabled: Type.Optional(Type.Boolean()),
          thresholdCents: Type.Optional(Cents),
          amountCents: Type.Optional(Cents),
        },
        { additionalProperties: false },
      ),
    ),
    monthlySpendCapCents: Type.Optional(Type.Union([Cents, Type.Null()])),
  },
  { additionalProperties: false },
);

export const updateWallet = defineRoute({
  method: 'PATCH',
  path: '/v1/wallet',
  operationId: 'updateWallet',
  summary: 'Update wallet settings: auto-recharge (threshold, amount) and the monthly spend cap; fields left out keep their value',
  description:
    "Changes the wallet's auto-recharge (threshold and amount) and monthly spend cap; fields left out keep their value. Owners and admins only when signed in.",
  tags: ['wallet'],
  access: { scopes: ['wallet.write'] },
  errors: ['not_found'],
  owner: namedWorkspace,
  body: WalletPatch,
  responses: { 200: WalletOut },
  handler: async ({ auth, body, services }) => {
    const workspace = await moneyWorkspace(openUnit(services.db), auth, body.workspaceId, { action: 'change wallet settings' });
    const patch: WalletSettingsPatch = {
      ...(body.autoRecharge ? { autoRecharge: body.autoRecharge } : {}),
      ...(body.monthlySpendCapCents !== undefined ? { monthlySpendCapCents: body.monthlySpendCapCents } : {}),
    };
    const reply = await services.actors.ask('ws', workspace.id, { type: 'wallet_settings', patch });
    if ('refused' in reply) throw new ApiError('validation_error', `body.${reply.refused}`);
    return { body: toWalletOut(workspace.id, services.catalog.plan(workspace.plan), reply) };
  },
});
