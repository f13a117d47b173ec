import { Type } from '@sinclair/typebox';
import { ApiError } from '../../errors.ts';
import { defineRoute } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import { enterWorkspace } from '../workspaces/access.ts';
import { checkModel, IDEMPOTENCY_KEY, orderOf, requestHash } from './draft.ts';
import { GenerationDetailOut, GenerationMode, PaymentModeName, toGenerationDetailOut } from './shape.ts';
import { namedWorkspace } from '../../owner.ts';

const UrlList = Type.Array(Type.String({ minLength: 1, maxLength: 16 * 1024 * 1024 }), { maxItems: 4 });
const IdList = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 4 });

export const CreateGenerationIn = Type.Object(
  {
    workspaceId: Type.String({ minLength: 1, maxLength: 64 }),
    mode: GenerationMode,
    model: Type.String({ minLength: 1, maxLength: 100, description: 'A model id of GET /v1/models whose mode is `mode`.' }),
    params: Type.Optional(Type.Object({}, { additionalProperties: true, description: "Validated against the model's parameterSchema." })),
    inputs: Type.Optional(
      Type.Object(
        {
          imageAssetIds: Type.Optional(IdList),
          videoAssetIds: Type.Optional(IdList),
          imageUrls: Type.Optional(UrlList),
          videoUrls: Type.Optional(UrlList),
        },
        { additionalProperties: false },
      ),
    ),
    paymentMode: Type.Optional(PaymentModeName),
    project: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'A label to filter by.' })),
  },
  { additionalProperties: false },
);

export const createGeneration = defineRoute({
  method: 'POST',
  path: '/v1/generations',
  operationId: 'createGeneration',
  summary: 'Create a generation; it starts queued. Accepts an Idempotency-Key header',
  description:
    'Creates a generation job; it starts queued and its credits (or wallet funds) are held until it finishes. Send an Idempotency-Key header to make retries safe: the same key and body answer the first result again, another body with the same key is 409. Refusals: too few credits or wallet funds (402), a model or concurrency limit of the plan (422), and a platform-wide pause (503).',
  tags: ['generations'],
  access: { scopes: ['generations.write'] },
  errors: ['not_found', 'conflict', 'insufficient_credits', 'wallet_insufficient_balance', 'wallet_pending_minimum', 'plan_limit_reached', 'generation_paused'],
  owner: namedWorkspace,
  body: CreateGenerationIn,
  responses: { 201: GenerationDetailOut },
  handler: async ({ body, auth, headers, services }) => {
    if (services.switches.generationPaused().paused) throw new ApiError('generation_paused');
    const checked = checkModel(services, body);
    await enterWorkspace(() => openUnit(services.db), auth, body.workspaceId);
    const order = await orderOf(services, auth, body, checked);

    const idempotencyKey = headers['idempotency-key'];
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new ApiError('validation_error', 'Idempotency-Key: 1 to 255 visible ASCII characters');
    }
    const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, hash: requestHash(body) };
    const reply = await services.actors.ask('ws', body.workspaceId, { type: 'create', order, idempotency });
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
