import { Ajv, type ValidateFunction } from 'ajv';
import type { PlanId } from '../plans.ts';
import { MODELS, MODES, type Mode, type ModelRecord } from './models.ts';

export { MODELS, MODES, type Mode, type ModelRecord };

export type ParamsCheck = { ok: true; params: Record<string, unknown> } | { ok: false; message: string };

interface Entry {
  model: ModelRecord;
  validate: ValidateFunction;
}

/** The catalog with each model's parameterSchema compiled once, when the catalog loads. */
export class ModelCatalog {
  private readonly byId = new Map<string, Entry>();

  constructor(models: ModelRecord[] = MODELS, private readonly providersAvailable: (provider: ModelRecord['provider']) => boolean = () => true) {
    const ajv = new Ajv({ allErrors: false, useDefaults: true, strict: false, coerceTypes: false });
    for (const model of models) {
      if (this.byId.has(model.id)) throw new Error(`duplicate model id ${model.id}`);
      this.byId.set(model.id, { model, validate: ajv.compile(model.parameterSchema) });
    }
  }

  get(id: string): ModelRecord | undefined {
    return this.byId.get(id)?.model;
  }

  all(): ModelRecord[] {
    return [...this.byId.values()].map((e) => e.model);
  }

  /** Models whose provider is configured on this service. */
  offered(): ModelRecord[] {
    return this.all().filter((m) => this.providersAvailable(m.provider));
  }

  isAllowed(model: ModelRecord, plan: PlanId): boolean {
    return model.plans.includes(plan);
  }

  /** Validates (and fills defaults into) a copy of the params; the message names the field. */
  checkParams(modelId: string, params: unknown): ParamsCheck {
    const entry = this.byId.get(modelId);
    if (!entry) return { ok: false, message: `model: unknown model "${modelId}"` };
    const copy = structuredClone(params ?? {}) as Record<string, unknown>;
    if (entry.validate(copy)) return { ok: true, params: copy };
    const error = entry.validate.errors?.[0];
    if (!error) return { ok: false, message: 'params: not valid' };
    const field = `params${error.instancePath.replace(/\//g, '.')}`;
    if (error.keyword === 'additionalProperties') {
      return { ok: false, message: `${field}: unknown parameter "${String((error.params as { additionalProperty: string }).additionalProperty)}" for model ${modelId}` };
    }
    if (error.keyword === 'required') return { ok: false, message: `${field}.${String((error.params as { missingProperty: string }).missingProperty)}: is required` };
    if (error.keyword === 'enum') {
      const allowed = (error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ');
      return { ok: false, message: `${field}: must be one of ${allowed}` };
    }
    return { ok: false, message: `${field}: ${error.message ?? 'is not valid'}` };
  }

  /** Credits a job costs: the model's price per unit times the units the params ask for. */
  price(model: ModelRecord, params: Record<string, unknown>): number {
    switch (model.pricing.per) {
      case 'job':
        return model.pricing.credits;
      case 'image':
        return model.pricing.credits * (typeof params.numImages === 'number' ? params.numImages : 1);
      case 'second':
        return model.pricing.credits * Math.ceil(typeof params.durationSeconds === 'number' ? params.durationSeconds : 1);
    }
  }
}
