/** Turns a generation's inputs (asset ids, URLs, data URLs) into bytes for the provider. */
export interface InputResolver {
  resolve(workspaceId: string, inputs: Record<string, unknown>): Promise<{ images: Buffer[]; videos: Buffer[] }>;
}

/** The error a generation fails with when an input cannot be used; its code becomes the generation's errorCode. */
export class InputError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'InputError';
  }
}

/** Data URLs only; asset ids and http(s) URLs need the blob store and the egress guard. */
export const dataUrlInputs: InputResolver = {
  async resolve(_workspaceId, inputs) {
    const decode = (list: unknown) =>
      (Array.isArray(list) ? list : []).map((value) => {
        const match = typeof value === 'string' ? /^data:[^;,]+;base64,(.*)$/s.exec(value) : null;
        if (!match) throw new InputError('input_unavailable', 'Only data URLs can be used as inputs on this service.');
        return Buffer.from(match[1]!, 'base64');
      });
    if ((Array.isArray(inputs.imageAssetIds) && inputs.imageAssetIds.length) || (Array.isArray(inputs.videoAssetIds) && inputs.videoAssetIds.length)) {
      throw new InputError('input_unavailable', 'Asset inputs need the blob store.');
    }
    return { images: decode(inputs.imageUrls), videos: decode(inputs.videoUrls) };
  },
};
