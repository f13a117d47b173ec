import { Type, type Static } from '@sinclair/typebox';

/**
 * What a catalog deployment of kind `replicate` names: exactly one of a model (`owner/name`, run through
 * POST /v1/models/{owner}/{name}/predictions, for official models), a version (the 64-hex version id, or
 * `owner/name:id`, through POST /v1/predictions) or a deployment (`owner/name`, through
 * POST /v1/deployments/{owner}/{name}/predictions). `files` names the upstream input fields that receive
 * our input files as data URLs (the model's own field names: `image`, `input_image`, `video`, ...).
 */
const ownerName = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$' });

const files = Type.Optional(
  Type.Object(
    {
      /** The first input image, as one data URL. */
      image: Type.Optional(Type.String({ minLength: 1 })),
      /** Every input image, as an array of data URLs (models that take several reference images). */
      images: Type.Optional(Type.String({ minLength: 1 })),
      /** The first input video. */
      video: Type.Optional(Type.String({ minLength: 1 })),
      /** The mask (inpainting). */
      mask: Type.Optional(Type.String({ minLength: 1 })),
    },
    { additionalProperties: false },
  ),
);

export const replicateDeploymentTarget = Type.Union([
  Type.Object({ model: ownerName, files }, { additionalProperties: false }),
  Type.Object(
    { version: Type.String({ pattern: '^([A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*:)?[0-9a-f]{64}$' }), files },
    { additionalProperties: false },
  ),
  Type.Object({ deployment: ownerName, files }, { additionalProperties: false }),
]);

export type ReplicateDeploymentTarget = Static<typeof replicateDeploymentTarget>;

/** The create call for a target: its path under the base URL and the body fields it adds besides `input`. */
export function createRoute(target: ReplicateDeploymentTarget): { path: string; body: Record<string, string> } {
  if ('model' in target) return { path: `/models/${target.model}/predictions`, body: {} };
  if ('deployment' in target) return { path: `/deployments/${target.deployment}/predictions`, body: {} };
  return { path: '/predictions', body: { version: target.version } };
}
