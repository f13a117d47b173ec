/**
 * The handlers a uWS app is given, released when the server stops. The native app keeps every handler it
 * was given (and so everything the handler reaches: the services, the database, PGlite's memory) for the
 * life of the process, even after `app.close()`; each handler is therefore handed over as a stand-in that
 * calls it through a reference `release()` drops. A process that starts and stops several servers (the
 * tests, a group of test files in one process) then frees each one's memory once it has stopped.
 */
export class HandlerLease {
  #releases: Array<() => void> = [];

  /** `fn`, called through a reference this lease drops on release; once released, the stand-in does nothing. */
  hold<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R | undefined {
    let target: ((...args: A) => R) | undefined = fn;
    this.#releases.push(() => {
      target = undefined;
    });
    return (...args: A) => target?.(...args);
  }

  /** Drops every handler held: call once the app has closed its sockets (its close callbacks have run). */
  release(): void {
    for (const release of this.#releases) release();
    this.#releases = [];
  }
}
