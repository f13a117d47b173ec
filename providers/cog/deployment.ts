import { Type, type Static } from '@sinclair/typebox';

/**
 * What a catalog deployment of kind `cog` names. A Cog container serves exactly one model, so there is no
 * model or version to choose: only where the container is (when not at COG_BASE_URL) and which of the
 * model's inputs take our input files, as `data:` URLs.
 */
export const cogDeploymentTarget = Type.Object(
  {
    /** The container's base URL, for a deployment whose model runs in another container than COG_BASE_URL's. */
    baseUrl: Type.Optional(Type.String({ pattern: '^https?://[^\\s/@]+(/[^\\s]*)?$' })),
    /** The model's input that takes the input image (default `image`). */
    imageInput: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    /** The model takes a list of images at `imageInput` (`list[Path]`): every input image goes there. */
    imageInputIsList: Type.Optional(Type.Boolean()),
    /** The model's input that takes the input video (default `video`). */
    videoInput: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    /** The model's input that takes the mask (default `mask`). */
    maskInput: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  },
  { additionalProperties: false },
);

export type CogDeploymentTarget = Static<typeof cogDeploymentTarget>;
