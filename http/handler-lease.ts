/**
 * The handlers a uWS app is given, released when the server stops. The native app keeps every handler it
 * was given (and so everything the handler reaches: the services, the database, PGlite's memory) for the
 * life of the process, even after `app.close()`; each handler is therefore handed over as a stand-in that
 * calls it through a reference `release()` drops. A process that starts and stops several servers (the
 * tests, a group of test files in one process) then frees each one's memory once it has stopped.
 */
export class HandlerLease {
  #releases: Array<() => void> = [];

  /**
   * `fn`, called through a reference this lease drops on release; once released, the stand-in does nothing.
   * uWS calls a handler with at most three arguments; they are passed as they are, without collecting them
   * in an array (the request handler's stand-in runs on every request).
   */
  hold<A extends [unknown?, unknown?, unknown?], R>(fn: (...args: A) => R): (...args: A) => R | undefined {
    let target = fn as unknown as ((a: unknown, b: unknown, c: unknown) => R) | undefined;
    this.#releases.push(() => {
      target = undefined;
    });
    return ((a: unknown, b: unknown, c: unknown) => target?.(a, b, c)) as unknown as (...args: A) => R | undefined;
  }

  /** Drops every handler held: call once the app has closed its sockets (its close callbacks have run). */
  release(): void {
    for (const release of this.#releases) release();
    this.#releases = [];
  }
}
