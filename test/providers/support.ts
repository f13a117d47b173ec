// Independent checks for the local provider's outputs: the bundled ffmpeg run as a decoder
// (the package ships no ffprobe), and small fixtures it makes.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const FFMPEG: string = (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;

export interface Decoded {
  code: number | null;
  stderr: string;
  stdout: Buffer;
  /** From the container header (may be absent for piped OGG). */
  durationSeconds?: number;
  /** How much media the decoder actually got through (the last `time=` of its progress). */
  decodedSeconds?: number;
  videoCodec?: string;
  audioCodec?: string;
  width?: number;
  height?: number;
  sampleRate?: number;
}

export function ffmpeg(args: string[], input?: Buffer): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(FFMPEG, ['-hide_banner', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? Buffer.alloc(0));
  });
}

/** `ffmpeg -i pipe: -f null -`: decodes every frame; exit 0 means the file is valid. */
export async function decode(bytes: Buffer): Promise<Decoded> {
  const { code, stdout, stderr } = await ffmpeg(['-stats', '-i', 'pipe:0', '-f', 'null', '-'], bytes);
  const input = stderr.split(/^Output #0/m)[0] ?? '';
  const result: Decoded = { code, stderr, stdout };
  const duration = /Duration: (\d+):(\d+):(\d+\.\d+)/.exec(input);
  if (duration) result.durationSeconds = +duration[1]! * 3600 + +duration[2]! * 60 + +duration[3]!;
  const times = [...stderr.matchAll(/time=(\d+):(\d+):(\d+\.\d+)/g)];
  const last = times[times.length - 1];
  if (last) result.decodedSeconds = +last[1]! * 3600 + +last[2]! * 60 + +last[3]!;
  const video = /Video: (\w+)[^\n]*?, (\d+)x(\d+)/.exec(input);
  if (video) {
    result.videoCodec = video[1]!;
    result.width = +video[2]!;
    result.height = +video[3]!;
  }
  const audio = /Audio: (\w+)[^\n]*?, (\d+) Hz/.exec(input);
  if (audio) {
    result.audioCodec = audio[1]!;
    result.sampleRate = +audio[2]!;
  }
  return result;
}

/** A still image or short clip in any format ffmpeg writes, from a lavfi source. */
export async function fixture(source: string, outputArgs: string[]): Promise<Buffer> {
  const { code, stdout, stderr } = await ffmpeg(['-loglevel', 'error', '-f', 'lavfi', '-i', source, ...outputArgs, 'pipe:1']);
  if (code !== 0) throw new Error(`fixture ${source} failed: ${stderr}`);
  return stdout;
}
