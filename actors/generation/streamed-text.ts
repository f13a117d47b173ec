/**
 * The pieces of a text answer one attempt streamed (providers' `output` updates), kept by the generation
 * actor: once the first piece reached the streams, the job no longer moves to another deployment, and a
 * job that ends without its provider's usage is charged for what it streamed (docs/openai-compatible.md).
 */
export class StreamedText {
  private readonly pieces: string[] = [];

  /** Whether any piece was streamed. */
  get started(): boolean {
    return this.pieces.length > 0;
  }

  /** Keeps a piece; its index among the job's pieces. */
  add(delta: string): number {
    this.pieces.push(delta);
    return this.pieces.length - 1;
  }

  get text(): string {
    return this.pieces.join('');
  }
}
