import { Type, type Static } from '@sinclair/typebox';

const FIELD = Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$' });

/**
 * What a catalog deployment of kind `fal` names:
 * - `endpoint`: fal's endpoint id, `owner/app[/subpath]` (e.g. `fal-ai/flux/dev`), submitted to as is.
 * - `files`: the input fields our input files go in, as data URLs: `image` (one image; default `image_url`),
 *   `images` (every input image, as a list; when set, `image` is not used), `video` (default `video_url`),
 *   `mask` (default `mask_url`).
 * - `textField`: for text_to_text, the result's field holding the text (default: the first string among
 *   `output`, `text`, `response`).
 */
export const falDeploymentTarget = Type.Object(
  {
    endpoint: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)+$', maxLength: 256 }),
    files: Type.Optional(
      Type.Object(
        {
          image: Type.Optional(FIELD),
          images: Type.Optional(FIELD),
          video: Type.Optional(FIELD),
          mask: Type.Optional(FIELD),
        },
        { additionalProperties: false },
      ),
    ),
    textField: Type.Optional(FIELD),
  },
  { additionalProperties: false },
);

export type FalDeploymentTarget = Static<typeof falDeploymentTarget>;
