/**
 * An order priced and routed next to its reservation: the price and the deployment come from the catalog the
 * actor serves when it reserves the job, so what is reserved is the price of the catalog that runs it, and a
 * reload between the request's check and its reservation cannot split the two.
 */
import type { ModelCatalog } from '../../domain/catalog/index.ts';
import { chooseDeployment, jobNeedsOf } from '../../domain/catalog/routing.ts';
import type { GenerationDraft, GenerationOrder } from './protocol.ts';

/** An order with its price and deployment, or why the catalog served now cannot take it. */
export type PricedOrder = { ok: true; draft: GenerationDraft } | { ok: false; message: string };

/** What choosing a deployment reads besides the catalog: each deployment's jobs in flight, and a random draw (weighted routing). */
export interface RouteChoice {
  inFlight(deploymentId: string): number;
  random(): number;
}

/**
 * The order's price (its whole price, or for a token-priced model the most the job can cost) and its
 * deployment, by the model's strategy among those that serve the job (its breaker is asked at the hand-over).
 * Refused when a reload since the request was checked took the model away or changed its mode.
 */
export function priceOrder(order: GenerationOrder, catalog: ModelCatalog, choice: RouteChoice): PricedOrder {
  const model = catalog.get(order.modelId);
  if (!model || !catalog.isOffered(model)) return { ok: false, message: `model: unknown model "${order.modelId}"; see GET /v1/models` };
  if (model.mode !== order.mode) return { ok: false, message: `mode: model ${model.id} makes ${model.mode}, not ${order.mode}` };
  // An offered model has an available deployment: the strategy's choice, or the first of them. A model with one
  // deployment has nothing to choose (the strategy picks it or none, and then the fallback is that one).
  const only = model.deployments.length === 1 ? model.deployments[0] : undefined;
  const deployment =
    only ??
    chooseDeployment(model, jobNeedsOf(order.params, order.inputs), new Set(), { allows: () => true, inFlight: choice.inFlight, random: choice.random }) ??
    catalog.deploymentFor(model)!;
  return {
    ok: true,
    draft: {
      ...order,
      provider: deployment.provider,
      deploymentId: deployment.id,
      tokenTerms: catalog.tokenTerms(model) ?? null,
      credits: catalog.price(model, order.params),
      modelPlans: model.plans,
    },
  };
}
