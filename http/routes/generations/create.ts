import { createHash } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { enterWorkspace } from '../workspaces/access.ts';
import type { Mode } from '../../../actors/generation/catalog/models.ts';
import type { CreateReply, GenerationDraft } from '../../../actors/workspace/protocol.ts';
import { checkInputs } from './inputs.ts';
import { GenerationDetailOut, GenerationMode, PaymentModeName, toGenerationDetailOut } from './shape.ts';
import { namedWorkspace } from '../../owner.ts';

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const UrlList = Type.Array(Type.String({ minLength: 1, maxLength: 16 * 1024 * 1024 }), { maxItems: 4 });
const IdList = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 4 });

export const CreateGenerationIn = Type.Object({
  workspaceId: Type.String({ minLength: 1, maxLength: 64 }),
  mode: GenerationMode,
  model: Type.String({ minLength: 1, maxLength: 100, description: 'A model id of GET /v1/models whose mode is `mode`.' }),
  params: Type.Optional(Type.Object({}, { additionalProperties: true, description: "Validated against the model's parameterSchema." })),
  inputs: Type.Optional(Type.Object({
    imageAssetIds: Type.Optional(IdList),
    videoAssetIds: Type.Optional(IdList),
    imageUrls: Type.Optional(UrlList),
    videoUrls: Type.Optional(UrlList),
  }, { additionalProperties: false })),
  paymentMode: Type.Optional(PaymentModeName),
  project: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'A label to filter by.' })),
}, { additionalProperties: false });

export const createGeneration = defineRoute({
  method: 'POST',
  path: '/v1/generations',
  operationId: 'createGeneration',
  summary: 'Create a generation; it starts queued. Accepts an Idempotency-Key header',
  tags: ['generations'],
  access: { scopes: ['generations.write'] },
  owner: namedWorkspace,
  body: CreateGenerationIn,
  responses: { 201: GenerationDetailOut },
  handler: async ({ body, auth, headers, services }) => {
    const { catalog, actors } = services;
    if (services.switches.generationPaused().paused) throw new ApiError('generation_paused');
    const model = catalog.get(body.model);
    if (!model || !catalog.offered().includes(model)) throw new ApiError('validation_error', `model: unknown model "${body.model}"; see GET /v1/models`);
    if (model.mode !== body.mode) throw new ApiError('validation_error', `mode: model ${model.id} makes ${model.mode}, not ${body.mode}`);
    const params = catalog.checkParams(model.id, body.params ?? {});
    if (!params.ok) throw new ApiError('validation_error', params.message);

    await enterWorkspace(() => services.db.em(), auth, body.workspaceId);
    const inputs = await checkInputs(() => services.db.em(), body.workspaceId, model.mode as Mode, body.inputs ?? {});

    const idempotencyKey = headers['idempotency-key'];
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new ApiError('validation_error', 'Idempotency-Key: 1 to 255 visible ASCII characters');
    }
    const draft: GenerationDraft = {
      workspaceId: body.workspaceId,
      apiKeyId: auth?.kind === 'key' ? auth.keyId : null,
      userId: auth?.kind === 'session' ? auth.userId : null,
      mode: model.mode,
      modelId: model.id,
      provider: model.provider,
      params: params.params,
      inputs: inputs as Record<string, unknown>,
      paymentMode: body.paymentMode ?? 'credits',
      credits: catalog.price(model, params.params),
      project: body.project ?? null,
      modelPlans: model.plans,
    };
    const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, hash: requestHash(body) };
    const reply = await actors.ask<CreateReply>('ws', body.workspaceId, { type: 'create', draft, idempotency });
    switch (reply.kind) {
      case 'created':
        return { status: 201, body: toGenerationDetailOut(reply.generation) };
      case 'replay':
        return { status: 201, body: toGenerationDetailOut(reply.generation), headers: { 'Idempotent-Replayed': 'true' } };
      case 'refused':
        throw new ApiError(reply.code, reply.message);
    }
  },
});

/** The request as the Idempotency-Key compares it: the body with its keys in a stable order. */
function requestHash(body: unknown): string {
  return createHash('sha256').update(stableJson(body)).digest('hex');
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

