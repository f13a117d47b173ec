export class StartupError extends Error {
  /** The exit code `npm start` ends with: 78 (configuration) for a catalog that cannot be served, 1 otherwise. */
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'StartupError';
  }
}
