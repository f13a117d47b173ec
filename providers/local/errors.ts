/**
 * The one error the local provider's output makers throw.
 *
 * `code` tells the adapter how to end the generation:
 * - `invalid_params`: a param is out of range or of the wrong type (`field` names it);
 * - `invalid_input`: an input image/video is missing or cannot be decoded;
 * - `encoder_unavailable`: the bundled ffmpeg binary cannot be found or started;
 * - `encoder_failed`: ffmpeg ran and exited non-zero (the message carries the tail of its log);
 * - `encoder_timeout`: ffmpeg ran past its time-out and was killed.
 */
export type LocalOutputErrorCode = 'invalid_params' | 'invalid_input' | 'encoder_unavailable' | 'encoder_failed' | 'encoder_timeout';

export class LocalOutputError extends Error {
  override readonly name = 'LocalOutputError';
  readonly code: LocalOutputErrorCode;
  readonly field: string | undefined;

  constructor(code: LocalOutputErrorCode, message: string, field?: string) {
    super(message);
    this.code = code;
    this.field = field;
  }
}

export const invalidParam = (field: string, message: string) => new LocalOutputError('invalid_params', `${field}: ${message}`, field);
