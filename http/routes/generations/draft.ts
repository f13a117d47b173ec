import { createHash } from 'node:crypto';
import { ApiError } from '../../errors.ts';
import type { Principal } from '../../route.ts';
import { openUnit } from '../../../persistence/stores/unit.ts';
import type { Services } from '../../services.ts';
import type { Mode, ModelRecord } from '../../../domain/catalog/models.ts';
import type { GenerationOrder } from '../../../actors/workspace/protocol.ts';
import { checkInputs, type GenerationInputsIn } from './inputs.ts';
import type { PaymentMode } from './shape.ts';

/** An Idempotency-Key (header of a single create, `idempotencyKey` of a batch item): 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** What a create names, once its shape is valid (a single create's body, or a batch item with its batch's workspace). */
export interface GenerationRequest {
  workspaceId: string;
  mode: string;
  model: string;
  params?: Record<string, unknown>;
  inputs?: GenerationInputsIn;
  paymentMode?: PaymentMode;
  project?: string;
}

/** A request's model and params, checked against the catalog: the model offered and of the mode asked, its params valid for its parameterSchema. */
export interface CheckedModel {
  model: ModelRecord;
  params: Record<string, unknown>;
}

/** Checks what a request asks of the catalog (no I/O); throws the validation_error it answers. */
export function checkModel(services: Services, request: GenerationRequest): CheckedModel {
  const { catalog } = services;
  const model = catalog.get(request.model);
  if (!model || !catalog.isOffered(model)) throw new ApiError('validation_error', `model: unknown model "${request.model}"; see GET /v1/models`);
  if (model.mode !== request.mode) throw new ApiError('validation_error', `mode: model ${model.id} makes ${model.mode}, not ${request.mode}`);
  const params = catalog.checkParams(model.id, request.params ?? {});
  if (!params.ok) throw new ApiError('validation_error', params.message);
  return { model, params: params.params };
}

/**
 * The order the workspace actor prices, routes and reserves (actors/workspace/pricing.ts), once its inputs are
 * checked (of the workspace and right for the mode; throws validation_error). The caller has already checked
 * the model and params (checkModel) and that it may act in the workspace.
 */
export async function orderOf(
  services: Services,
  auth: Principal | undefined,
  request: GenerationRequest,
  { model, params }: CheckedModel,
): Promise<GenerationOrder> {
  const inputs = await checkInputs(() => openUnit(services.db), request.workspaceId, model.mode as Mode, request.inputs ?? {});
  return {
    workspaceId: request.workspaceId,
    apiKeyId: auth?.kind === 'key' ? auth.keyId : null,
    userId: auth?.kind === 'session' ? auth.userId : null,
    mode: model.mode,
    modelId: model.id,
    params,
    inputs: inputs as Record<string, unknown>,
    paymentMode: request.paymentMode ?? 'credits',
    project: request.project ?? null,
  };
}

/** The request as an Idempotency-Key compares it: the body with its keys in a stable order. */
export function requestHash(body: unknown): string {
  return createHash('sha256').update(stableJson(body)).digest('hex');
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}
