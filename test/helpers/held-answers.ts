/**
 * The answers a provider's fake has taken a request for but holds back until the test sends them (the fal and
 * Replicate fakes' `holdAnswers` and `answer`): a test chooses the moment each answer leaves, as the
 * submission-window tests do to kill the service a chosen time after it.
 */
export class HeldAnswers {
  /** Whether answers are held from now on (otherwise each is sent at once). */
  holding = false;
  private readonly held = new Map<string, () => void>();

  /** Sends the answer of request `id` now, or keeps it for `answer(id)` while holding; true when kept. */
  hold(id: string, send: () => void): boolean {
    if (!this.holding) {
      send();
      return false;
    }
    this.held.set(id, send);
    return true;
  }

  /** Sends the held answer of request `id`; false if none is held. */
  answer(id: string): boolean {
    const send = this.held.get(id);
    this.held.delete(id);
    send?.();
    return send !== undefined;
  }
}
