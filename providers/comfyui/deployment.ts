import { Type, type Static } from '@sinclair/typebox';

/** What a catalog deployment of kind `comfyui` names: its workflow, in ComfyUI's API format, once. */
const common = {
  /**
   * Node ids whose outputs are the job's files. Unset: every file of type `output` (SaveImage, SaveAudio,
   * VHS_VideoCombine with save_output...) that fits the job's mode; previews (type `temp`) are skipped.
   */
  outputNodes: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: 64 })),
  /**
   * Values for placeholders the job may not give (`{{steps}}`, a renamed input); a placeholder named here
   * is known to the template check. A job's own value (its input, then its params) wins.
   */
  defaults: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z][A-Za-z0-9_]*$' }), Type.Union([Type.String(), Type.Number(), Type.Boolean()]))),
};

export const comfyuiDeploymentTarget = Type.Union([
  Type.Object(
    {
      /** The workflow inline: the object "Save (API Format)" writes, node id → { class_type, inputs }. */
      workflow: Type.Record(Type.String(), Type.Unknown()),
      ...common,
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      /** A file holding that JSON; a relative path is taken from the service's working directory. */
      workflowFile: Type.String({ minLength: 1 }),
      ...common,
    },
    { additionalProperties: false },
  ),
]);

export type ComfyuiDeploymentTarget = Static<typeof comfyuiDeploymentTarget>;
