import type { ValidateFunction } from 'ajv';
import type { PlanBook, PlanEntitlements } from '../plans.ts';
import type { BuiltCatalog, DeploymentRecord, ModelRecord } from './build.ts';
import { MODES, type Mode } from './modes.ts';
import { paramsValidator } from './params-validator.ts';
import { isTokenPrice, reservationOf, tokenTermsOf, type TokenTerms } from './pricing.ts';

export { MODES, type Mode, type ModelRecord, type DeploymentRecord };
export { buildCatalog, type BuiltCatalog, type CatalogProblem, type BuildOptions } from './build.ts';

export type ParamsCheck = { ok: true; params: Record<string, unknown> } | { ok: false; message: string };

interface Entry {
  model: ModelRecord;
  validate: ValidateFunction;
}

/**
 * One version of the catalog, as the service serves it: the plans and the models with their prices and
 * deployments, each model's parameterSchema compiled once, when the catalog loads. A new file makes a new
 * ModelCatalog; a request works with the one that was current when it began (runtime/catalog-source.ts).
 */
export class ModelCatalog implements PlanBook {
  readonly version: string;
  private readonly byId = new Map<string, Entry>();
  private readonly planById = new Map<string, PlanEntitlements>();
  private readonly deploymentById = new Map<string, DeploymentRecord>();
  private readonly offeredModels: ModelRecord[];
  private readonly defaultPlanId: string;

  constructor(built: BuiltCatalog) {
    this.version = built.version;
    this.defaultPlanId = built.defaultPlan;
    for (const plan of built.plans) this.planById.set(plan.id, plan);
    for (const model of built.models) {
      this.byId.set(model.id, { model, validate: paramsValidator(model.parameterSchema) });
      for (const deployment of model.deployments) this.deploymentById.set(deployment.id, deployment);
    }
    this.offeredModels = built.models.filter((model) => model.deployments.some((d) => d.available));
  }

  get(id: string): ModelRecord | undefined {
    return this.byId.get(id)?.model;
  }

  all(): ModelRecord[] {
    return [...this.byId.values()].map((e) => e.model);
  }

  /** Models with a deployment whose provider is configured on this service. */
  offered(): ModelRecord[] {
    return this.offeredModels;
  }

  isOffered(model: ModelRecord): boolean {
    return model.deployments.some((d) => d.available);
  }

  /** The deployment a new job of the model goes to: the first whose provider is configured. */
  deploymentFor(model: ModelRecord): DeploymentRecord | undefined {
    return model.deployments.find((d) => d.available);
  }

  deployment(id: string): DeploymentRecord | undefined {
    return this.deploymentById.get(id);
  }

  deployments(): DeploymentRecord[] {
    return [...this.deploymentById.values()];
  }

  isAllowed(model: ModelRecord, plan: string): boolean {
    return model.plans.includes(plan);
  }

  plan(id: string): PlanEntitlements {
    return this.planById.get(id) ?? this.planById.get(this.defaultPlanId)!;
  }

  hasPlan(id: string): boolean {
    return this.planById.has(id);
  }

  plans(): PlanEntitlements[] {
    return [...this.planById.values()];
  }

  defaultPlan(): PlanEntitlements {
    return this.planById.get(this.defaultPlanId)!;
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
      return {
        ok: false,
        message: `${field}: unknown parameter "${String((error.params as { additionalProperty: string }).additionalProperty)}" for model ${modelId}`,
      };
    }
    if (error.keyword === 'required')
      return { ok: false, message: `${field}.${String((error.params as { missingProperty: string }).missingProperty)}: is required` };
    if (error.keyword === 'enum') {
      const allowed = (error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ');
      return { ok: false, message: `${field}: must be one of ${allowed}` };
    }
    return { ok: false, message: `${field}: ${error.message ?? 'is not valid'}` };
  }

  /** Credits a job reserves at creation: its whole price, or for a token-priced model the most it can cost. */
  price(model: ModelRecord, params: Record<string, unknown>): number {
    return reservationOf(model.price, params);
  }

  /** The token price a job keeps from its creation; undefined for a model not priced per token. */
  tokenTerms(model: ModelRecord): TokenTerms | undefined {
    return isTokenPrice(model.price) ? tokenTermsOf(model.price) : undefined;
  }
}
