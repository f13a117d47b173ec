/**
 * Param reading and shared settings for the local provider's output makers.
 *
 * The catalog validates params against each model's parameterSchema before a job reaches a
 * provider; these readers check again (the makers are a library and may be called directly)
 * and throw `LocalOutputError('invalid_params', …, field)` with the field named. Absent
 * params take the defaults below, which match the catalog's.
 *
 * `LocalOutputOptions` are the operator's knobs (sizes, caps, ffmpeg), not user params.
 * `sizeForAspectRatio(ratio, longSide, multiple)` maps one of the six ratios to pixels.
 */
import { invalidParam } from './errors.ts';
import { hashOf } from './random.ts';

export type Params = Record<string, unknown>;

export const LOCAL_ASPECT_RATIOS = ['1:1', '16:9', '9:16', '4:3', '3:4', '21:9'] as const;
export type AspectRatio = (typeof LOCAL_ASPECT_RATIOS)[number];

export interface LocalOutputOptions {
  /** Long side of generated images in pixels (default 512). */
  imageLongSide?: number;
  /** Long side of generated and restyled videos in pixels (default 320). */
  videoLongSide?: number;
  /** Frames per second of generated videos (default 24). */
  videoFps?: number;
  /** Caps on what one job may ask for. */
  maxImages?: number; // default 10
  maxAudioSeconds?: number; // default 30
  maxVideoSeconds?: number; // default 10
  maxTokens?: number; // default 4096
  /** PCM sample rate of audio outputs in Hz (default 22050). */
  audioSampleRate?: number;
  /** ffmpeg binary; default: the one shipped by @ffmpeg-installer/ffmpeg. */
  ffmpegPath?: string;
  /** Kill one ffmpeg run after this long (default 60 000 ms). */
  ffmpegTimeoutMs?: number;
  /** Where video work files go (default os.tmpdir()); each job's folder is removed after it. */
  tempDir?: string;
}

export const DEFAULTS = {
  imageLongSide: 512,
  videoLongSide: 320,
  videoFps: 24,
  maxImages: 10,
  maxAudioSeconds: 30,
  maxVideoSeconds: 10,
  maxTokens: 4096,
  audioSampleRate: 22050,
  ffmpegTimeoutMs: 60_000,
  audioSeconds: 3,
  videoSeconds: 2,
  strength: 0.6,
  temperature: 1,
  maxTokensDefault: 256,
} as const;

export function readString(params: Params, field: string, opts: { required?: boolean; maxLength?: number } = {}): string | undefined {
  const value = params[field];
  if (value === undefined || value === null) {
    if (opts.required) throw invalidParam(field, 'is required');
    return undefined;
  }
  if (typeof value !== 'string') throw invalidParam(field, 'must be a string');
  if (opts.required && value.trim() === '') throw invalidParam(field, 'must not be empty');
  if (opts.maxLength !== undefined && value.length > opts.maxLength) throw invalidParam(field, `must be at most ${opts.maxLength} characters`);
  return value;
}

export function readNumber(
  params: Params,
  field: string,
  opts: { min: number; max: number; fallback: number; integer?: boolean; exclusiveMin?: boolean },
): number {
  const value = params[field];
  if (value === undefined || value === null) return opts.fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw invalidParam(field, 'must be a finite number');
  if (opts.integer && !Number.isInteger(value)) throw invalidParam(field, 'must be an integer');
  if (opts.exclusiveMin ? value <= opts.min : value < opts.min) {
    throw invalidParam(field, `must be ${opts.exclusiveMin ? 'greater than' : 'at least'} ${opts.min} (got ${value})`);
  }
  if (value > opts.max) throw invalidParam(field, `must be at most ${opts.max} (got ${value})`);
  return value;
}

export function readEnum<T extends string>(params: Params, field: string, allowed: readonly T[], fallback: T): T {
  const value = params[field];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw invalidParam(field, `must be one of ${allowed.join(', ')}`);
  }
  return value as T;
}

/** The job's seed: params.seed when given, else one derived from the prompt, so a job is always reproducible. */
export function readSeed(params: Params, prompt: string | undefined): number {
  const value = params.seed;
  if (value === undefined || value === null) return hashOf('seed', prompt ?? '');
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 0xffffffff) {
    throw invalidParam('seed', 'must be an integer from 0 to 4294967295');
  }
  return value;
}

export function readAspectRatio(params: Params, fallback: AspectRatio): AspectRatio {
  return readEnum(params, 'aspectRatio', LOCAL_ASPECT_RATIOS, fallback);
}

/** Width and height for a ratio with the given long side, the short side rounded to a multiple of `multiple`. */
export function sizeForAspectRatio(ratio: AspectRatio, longSide: number, multiple = 1): { width: number; height: number } {
  const [a, b] = ratio.split(':').map(Number) as [number, number];
  const round = (n: number) => Math.max(multiple, Math.round(n / multiple) * multiple);
  const long = round(longSide);
  if (a === b) return { width: long, height: long };
  return a > b ? { width: long, height: round((longSide * b) / a) } : { width: round((longSide * a) / b), height: long };
}

/** The one of the six ratios closest (in log scale) to width:height. */
export function nearestAspectRatio(width: number, height: number): AspectRatio {
  const target = Math.log(width / height);
  let best: AspectRatio = '1:1';
  let bestDistance = Infinity;
  for (const ratio of LOCAL_ASPECT_RATIOS) {
    const [a, b] = ratio.split(':').map(Number) as [number, number];
    const distance = Math.abs(Math.log(a / b) - target);
    if (distance < bestDistance) {
      best = ratio;
      bestDistance = distance;
    }
  }
  return best;
}

export function option<K extends keyof typeof DEFAULTS & keyof LocalOutputOptions>(options: LocalOutputOptions | undefined, key: K): number {
  const value = options?.[key];
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : DEFAULTS[key];
}
