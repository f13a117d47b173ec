/**
 * Clean-ups run in reverse order of registration, as the AsyncDisposableStack of explicit resource
 * management does. Node 20 has `Symbol.asyncDispose` but not AsyncDisposableStack itself (V8 brings it with
 * Node 24): this class has its shape (`use`, `adopt`, `defer`, `disposeAsync`, `disposed`), so that it can
 * be swapped for the built-in one then.
 *
 * Two differences, both for a service's stop: a second `disposeAsync` answers the first one's promise (a
 * second stop waits for the first, where the built-in one resolves at once), and when several clean-ups fail
 * their errors are thrown together as one AggregateError, in the order they failed (the built-in one nests
 * them in SuppressedErrors). A single failure is thrown as it is. Every clean-up runs whatever failed before it.
 */
export class CleanupStack implements AsyncDisposable {
  private readonly steps: Array<() => unknown> = [];
  private disposing: Promise<void> | undefined;

  /** Whether disposeAsync has been called (the stack takes nothing more from then on). */
  get disposed(): boolean {
    return this.disposing !== undefined;
  }

  /** Registers `fn`, to run before everything registered earlier. */
  defer(fn: () => unknown): void {
    this.assertOpen();
    this.steps.push(fn);
  }

  /** Registers a resource's own `Symbol.asyncDispose` (or `Symbol.dispose`); null and undefined are passed through. */
  use<T extends AsyncDisposable | Disposable | null | undefined>(resource: T): T {
    this.assertOpen();
    if (resource === null || resource === undefined) return resource;
    const dispose =
      (resource as Partial<AsyncDisposable>)[Symbol.asyncDispose] ?? ((resource as Partial<Disposable>)[Symbol.dispose] as (() => unknown) | undefined);
    if (typeof dispose !== 'function') throw new TypeError('the resource has neither Symbol.asyncDispose nor Symbol.dispose');
    this.steps.push(() => dispose.call(resource));
    return resource;
  }

  /** Registers `onDispose(value)` and returns `value`. */
  adopt<T>(value: T, onDispose: (value: T) => unknown): T {
    this.defer(() => onDispose(value));
    return value;
  }

  /** Runs every clean-up, last registered first, each awaited before the next; at most once. */
  disposeAsync(): Promise<void> {
    this.disposing ??= this.runAll();
    return this.disposing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.disposeAsync();
  }

  private async runAll(): Promise<void> {
    const errors: unknown[] = [];
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      try {
        await step();
      } catch (error) {
        errors.push(error);
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `${errors.length} clean-ups failed`);
  }

  private assertOpen(): void {
    if (this.disposing) throw new ReferenceError('the cleanup stack is already disposed');
  }
}
