/**
 * Running the bundled ffmpeg (from the npm package @ffmpeg-installer/ffmpeg, a static build).
 *
 * - `ffmpegPath(options)`: options.ffmpegPath, else the packaged binary (resolved lazily, so
 *   text and image work never needs it); `LocalOutputError('encoder_unavailable')` if absent.
 * - `runFfmpeg(args, { input, timeoutMs, options })`: spawns ffmpeg with `args` (after
 *   `-hide_banner -nostdin` when there is no input), writes `input` to its stdin, collects
 *   stdout; resolves `{ stdout, stderr }` on exit 0. Non-zero exit → `encoder_failed` with
 *   the tail of the log; past the time-out the process is SIGKILLed → `encoder_timeout`.
 * - `hasEncoder(name, options)`: whether `ffmpeg -encoders` lists it (cached per binary).
 * - `withTempDir(fn, options)`: a fresh folder under os.tmpdir() (or options.tempDir),
 *   removed when fn settles, for work that cannot stream (MP4 output needs a seekable file).
 * - `parseMediaLog(stderr)`: Duration and the first video stream's size from ffmpeg's log.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalOutputError } from './errors.ts';
import { DEFAULTS, type LocalOutputOptions } from './params.ts';

const require = createRequire(import.meta.url);
let packagedPath: string | undefined;

export function ffmpegPath(options?: LocalOutputOptions): string {
  if (options?.ffmpegPath) return options.ffmpegPath;
  if (packagedPath) return packagedPath;
  try {
    packagedPath = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
    return packagedPath;
  } catch (err) {
    // The package throws plain strings (unsupported platform, binary missing).
    throw new LocalOutputError('encoder_unavailable', `ffmpeg is not available: ${err instanceof Error ? err.message : String(err)}`);
  }
}

const STDERR_KEEP = 64 * 1024;

export interface FfmpegRun {
  input?: Buffer;
  timeoutMs?: number;
  options?: LocalOutputOptions;
  /** What the run is for, in error messages (e.g. 'MP3 encoding'). */
  what: string;
}

export async function runFfmpeg(args: string[], run: FfmpegRun): Promise<{ stdout: Buffer; stderr: string }> {
  const path = ffmpegPath(run.options);
  try {
    return await spawnOnce(path, args, run);
  } catch (err) {
    // npm may skip the package's own `chmod u+x` postinstall; make the binary runnable once and retry.
    if (err instanceof SpawnError && err.errno === 'EACCES' && !run.options?.ffmpegPath) {
      await chmod(path, 0o755).catch(() => undefined);
      return spawnOnce(path, args, run).catch((again) => {
        throw again instanceof SpawnError ? unavailable(path, again) : again;
      });
    }
    throw err instanceof SpawnError ? unavailable(path, err) : err;
  }
}

class SpawnError extends Error {
  constructor(
    readonly errno: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

const unavailable = (path: string, err: SpawnError) => new LocalOutputError('encoder_unavailable', `ffmpeg could not be started (${path}): ${err.message}`);

function spawnOnce(path: string, args: string[], run: FfmpegRun): Promise<{ stdout: Buffer; stderr: string }> {
  const timeoutMs = run.timeoutMs ?? run.options?.ffmpegTimeoutMs ?? DEFAULTS.ffmpegTimeoutMs;
  const fullArgs = ['-hide_banner', ...(run.input ? [] : ['-nostdin']), ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(path, fullArgs, { stdio: [run.input ? 'pipe' : 'ignore', 'pipe', 'pipe'], windowsHide: true });
    const out: Buffer[] = [];
    let stderr = '';
    let settled = false;
    let timedOut = false;
    const finish = (fn: () => void) => {
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        fn();
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);

    child.stdout!.on('data', (data: Buffer) => out.push(data));
    child.stderr!.on('data', (data: Buffer) => {
      stderr += data.toString('utf8');
      if (stderr.length > 2 * STDERR_KEEP) stderr = stderr.slice(-STDERR_KEEP);
    });
    child.on('error', (err: NodeJS.ErrnoException) => finish(() => reject(new SpawnError(err.code, err.message))));
    child.on('close', (code, signal) =>
      finish(() => {
        if (timedOut) {
          reject(new LocalOutputError('encoder_timeout', `${run.what}: ffmpeg did not finish within ${timeoutMs} ms and was stopped`));
        } else if (code !== 0) {
          const tail = stderr.trim().split('\n').slice(-4).join(' | ');
          reject(new LocalOutputError('encoder_failed', `${run.what}: ffmpeg exited with ${code ?? signal}: ${tail}`));
        } else {
          resolve({ stdout: Buffer.concat(out), stderr });
        }
      }),
    );
    if (run.input && child.stdin) {
      // ffmpeg may stop reading early (bad input); its exit code tells why, so EPIPE is not the error to report.
      child.stdin.on('error', () => undefined);
      child.stdin.end(run.input);
    }
  });
}

const encoderLists = new Map<string, Promise<Set<string>>>();

export async function hasEncoder(name: string, options?: LocalOutputOptions): Promise<boolean> {
  const path = ffmpegPath(options);
  let list = encoderLists.get(path);
  if (!list) {
    list = runFfmpeg(['-encoders'], { options, what: 'listing encoders' }).then(({ stdout }) => {
      const names = new Set<string>();
      for (const line of stdout.toString('utf8').split('\n')) {
        const match = /^\s*[VAS][A-Z.]{5}\s+(\S+)/.exec(line);
        if (match) names.add(match[1]!);
      }
      return names;
    });
    list.catch(() => encoderLists.delete(path));
    encoderLists.set(path, list);
  }
  return (await list).has(name);
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>, options?: LocalOutputOptions): Promise<T> {
  const dir = await mkdtemp(join(options?.tempDir ?? tmpdir(), 'local-provider-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface MediaLog {
  durationSeconds?: number;
  width?: number;
  height?: number;
  videoCodec?: string;
  audioCodec?: string;
}

/** Reads the input section of an ffmpeg log (`Input #0 … Duration: … Stream …`). */
export function parseMediaLog(stderr: string): MediaLog {
  const result: MediaLog = {};
  const inputSection = stderr.split(/^Output #0/m)[0] ?? stderr;
  const duration = /Duration: (\d+):(\d+):(\d+(?:\.\d+)?)/.exec(inputSection);
  if (duration) result.durationSeconds = Number(duration[1]) * 3600 + Number(duration[2]) * 60 + Number(duration[3]);
  const video = /Stream #\d+:\d+.*?: Video: (\w+)[^\n]*?, (\d{2,5})x(\d{2,5})/.exec(inputSection);
  if (video) {
    result.videoCodec = video[1]!;
    result.width = Number(video[2]);
    result.height = Number(video[3]);
  }
  const audio = /Stream #\d+:\d+.*?: Audio: (\w+)/.exec(inputSection);
  if (audio) result.audioCodec = audio[1]!;
  return result;
}
