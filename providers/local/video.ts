/**
 * Videos for the local provider (text_to_video, image_to_video, video_to_video), always MP4
 * made by the bundled ffmpeg: H.264 (libx264, yuv420p, +faststart) when the binary has libx264,
 * else MPEG-4 part 2. No audio track. Work files live in a temporary folder that is removed
 * afterwards, because the MP4 muxer needs a seekable output to put its index up front.
 *
 * `makeVideo(mode, params, inputs, options)` → one `VideoFile` with width, height and
 * durationSeconds. Params: prompt, negativePrompt, seed, aspectRatio, durationSeconds
 * (> 0, default 2, at most options.maxVideoSeconds, default 10), strength (video_to_video,
 * 0..1, default 0.6). Size: long side options.videoLongSide (default 320), short side from
 * the ratio rounded to even (16:9 → 320x180, 21:9 → 320x138); frame rate options.videoFps (24).
 *
 * - text_to_video: the seed picks the scene: most often a painting (the picture text_to_image
 *   would paint for the prompt) seen through a slow pan, or zoom when the prompt says so, with
 *   its hue drifting; else ffmpeg's `life` or `cellauto` sources seeded by the seed and tinted,
 *   or the `testsrc2` pattern. Only lavfi sources every build has are used (no drawtext).
 * - image_to_video: the first input image (PNG, JPEG, GIF or WEBP) is the frames' source,
 *   scaled to cover the frame and panned across (zoomed when the prompt asks for a zoom);
 *   without aspectRatio the ratio nearest the image's is used.
 * - video_to_video: the first input video is re-encoded, at most durationSeconds (default: all
 *   of it up to the cap) and scaled down to fit the long side (or cropped to aspectRatio when
 *   given), through a filter the prompt picks: black and white / noir / monochrome →
 *   desaturate and add contrast; negative / invert → negate; sepia / vintage → sepia tones;
 *   anything else → a hue rotation of up to 150° scaled by strength. Its real size and
 *   duration are read back from the output.
 */
import { writeFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LocalOutputError } from './errors.ts';
import { hasEncoder, parseMediaLog, runFfmpeg, withTempDir } from './ffmpeg.ts';
import { paint } from './image.ts';
import { encodePng } from './png.ts';
import { hashOf, pick, rng } from './random.ts';
import {
  DEFAULTS,
  nearestAspectRatio,
  option,
  readAspectRatio,
  readNumber,
  readSeed,
  readString,
  sizeForAspectRatio,
  type AspectRatio,
  type LocalOutputOptions,
  type Params,
} from './params.ts';
import { imageDimensions, sniffContentType } from './sniff.ts';

export interface VideoFile {
  bytes: Buffer;
  contentType: 'video/mp4';
  mediaType: 'video';
  width: number;
  height: number;
  durationSeconds: number;
}

const IMAGE_EXTENSIONS: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp' };

export async function makeVideo(
  mode: 'text_to_video' | 'image_to_video' | 'video_to_video',
  params: Params,
  inputs: { images?: Buffer[]; videos?: Buffer[] },
  options?: LocalOutputOptions,
): Promise<VideoFile> {
  const prompt = readString(params, 'prompt', { required: mode === 'text_to_video' }) ?? '';
  const negativePrompt = readString(params, 'negativePrompt') ?? '';
  const seed = readSeed(params, prompt);
  const maxSeconds = option(options, 'maxVideoSeconds');
  const requested =
    params.durationSeconds === undefined || params.durationSeconds === null
      ? undefined
      : readNumber(params, 'durationSeconds', { min: 0, max: maxSeconds, fallback: DEFAULTS.videoSeconds, exclusiveMin: true });
  const fps = Math.round(option(options, 'videoFps'));
  const longSide = option(options, 'videoLongSide');

  if (mode === 'video_to_video') {
    const strength = readNumber(params, 'strength', { min: 0, max: 1, fallback: DEFAULTS.strength });
    const aspectRatio = params.aspectRatio === undefined || params.aspectRatio === null ? undefined : readAspectRatio(params, '1:1');
    const video = inputs.videos?.[0];
    if (!video?.length) throw new LocalOutputError('invalid_input', 'video_to_video needs an input video');
    const codec = await videoCodecArgs(options);
    return restyle(video, { prompt, seed, strength, aspectRatio, seconds: requested, maxSeconds, fps, longSide, codec }, options);
  }

  const durationSeconds = requested ?? Math.min(DEFAULTS.videoSeconds, maxSeconds);
  const frames = Math.max(1, Math.round(durationSeconds * fps));
  let still: Buffer | undefined;
  let fallbackRatio: AspectRatio = '1:1';
  if (mode === 'image_to_video') {
    still = inputs.images?.[0];
    if (!still?.length) throw new LocalOutputError('invalid_input', 'image_to_video needs an input image');
    const dims = imageDimensions(still);
    if (dims) fallbackRatio = nearestAspectRatio(dims.width, dims.height);
  }
  const { width, height } = sizeForAspectRatio(readAspectRatio(params, fallbackRatio), longSide, 2);
  const r = rng(hashOf('video', seed, prompt, negativePrompt));
  const zoom = /\bzoom/i.test(prompt);
  const codec = await videoCodecArgs(options);

  return withTempDir(async (dir) => {
    const out = join(dir, 'out.mp4');
    let inputArgs: string[];
    let filter: string;
    const scene = still ? 'still' : pick(r, ['painting', 'painting', 'painting', 'life', 'cellauto', 'testsrc2'] as const);
    if (scene === 'still' || scene === 'painting') {
      let file: string;
      if (still) {
        const type = sniffContentType(still);
        const ext = type && IMAGE_EXTENSIONS[type];
        if (!ext) throw new LocalOutputError('invalid_input', 'the input image is not PNG, JPEG, GIF or WEBP');
        file = join(dir, `in.${ext}`);
        await writeFile(file, still);
        await readable(file, 'the input image', options);
      } else {
        // Painted 25% larger than the frame, so the pan has room to move.
        const [pw, ph] = [Math.round(width * 1.25), Math.round(height * 1.25)];
        file = join(dir, 'in.png');
        await writeFile(file, await encodePng(pw, ph, paint(pw, ph, prompt, negativePrompt, hashOf('image', seed, prompt, negativePrompt, 0))));
      }
      inputArgs = ['-loop', '1', '-framerate', String(fps), '-i', file];
      filter = motion(width, height, frames, fps, zoom, r);
      if (!still) filter += `,hue=H=${(r() * 0.6 - 0.3).toFixed(3)}*t`;
    } else {
      const sourceSeed = hashOf('source', seed, prompt) % 2_000_000_000;
      // Cellular sources run on a quarter-size grid, scaled up so the cells read as blocks, not noise.
      const size = scene === 'testsrc2' ? `${width}x${height}` : `${Math.ceil(width / 4)}x${Math.ceil(height / 4)}`;
      const source =
        scene === 'life'
          ? `life=s=${size}:r=${fps}:seed=${sourceSeed}:ratio=${(0.08 + r() * 0.2).toFixed(3)}:mold=10:life_color=${hex(r)}:death_color=${hex(r, 0.25)}:mold_color=${hex(r, 0.5)}`
          : scene === 'cellauto'
            ? `cellauto=s=${size}:r=${fps}:rule=${pick(r, [18, 30, 45, 73, 90, 105, 110, 150])}:seed=${sourceSeed}:random_fill_ratio=0.5:scroll=1`
            : `testsrc2=s=${size}:r=${fps}`;
      inputArgs = ['-f', 'lavfi', '-i', source];
      const grid = scene === 'testsrc2' ? '' : `scale=${width}:${height}:flags=neighbor,`;
      filter =
        grid +
        (scene === 'cellauto'
          ? `format=rgb24,colorchannelmixer=rr=${tint(r)}:gg=${tint(r)}:bb=${tint(r)}`
          : `hue=H=${(r() * 2 * Math.PI).toFixed(3)}+${(r() * 1.2 - 0.6).toFixed(3)}*t`);
    }
    await runFfmpeg(['-loglevel', 'error', ...inputArgs, '-vf', `${filter},format=yuv420p`, '-frames:v', String(frames), '-r', String(fps), ...codec, out], {
      options,
      what: `${mode} encoding`,
    });
    return { bytes: await readFile(out), contentType: 'video/mp4', mediaType: 'video', width, height, durationSeconds: frames / fps };
  }, options);
}

async function videoCodecArgs(options?: LocalOutputOptions): Promise<string[]> {
  const video = (await hasEncoder('libx264', options))
    ? ['-c:v', 'libx264', '-preset', 'veryfast', '-crf', '26', '-pix_fmt', 'yuv420p']
    : ['-c:v', 'mpeg4', '-q:v', '5', '-pix_fmt', 'yuv420p'];
  return [...video, '-an', '-map_metadata', '-1', '-fflags', '+bitexact', '-flags:v', '+bitexact', '-movflags', '+faststart', '-f', 'mp4', '-y'];
}

const hex = (r: () => number, scale = 1) =>
  `#${Array.from({ length: 3 }, () =>
    Math.round(r() * 255 * scale)
      .toString(16)
      .padStart(2, '0'),
  ).join('')}`;
const tint = (r: () => number) => (0.35 + r() * 0.65).toFixed(3);

/** A slow pan across the picture (direction from the PRNG), or a zoom towards its centre. */
function motion(width: number, height: number, frames: number, fps: number, zoom: boolean, r: () => number): string {
  const seconds = frames / fps;
  if (zoom) {
    // Upscaled first so zoompan's whole-pixel steps do not jitter much.
    const [bw, bh] = [width * 2, height * 2];
    return (
      `scale=${bw}:${bh}:force_original_aspect_ratio=increase,crop=${bw}:${bh},` +
      `zoompan=z='1+0.25*on/${frames}':x='iw/2-iw/zoom/2':y='ih/2-ih/zoom/2':d=1:s=${width}x${height}:fps=${fps}`
    );
  }
  const [cw, ch] = [even(width * 1.2), even(height * 1.2)];
  const [fromX, fromY] = [r() < 0.5 ? 0 : 1, r() < 0.5 ? 0 : 1];
  const along = (from: number) => (from === 0 ? `t/${seconds.toFixed(4)}` : `(1-t/${seconds.toFixed(4)})`);
  return (
    `scale=${cw}:${ch}:force_original_aspect_ratio=increase,crop=${cw}:${ch},` +
    `crop=${width}:${height}:x='(in_w-out_w)*min(1,${along(fromX)})':y='(in_h-out_h)*min(1,${along(fromY)})'`
  );
}

/** Decodes the first frame of an input file, so a bad input fails as invalid_input rather than as an encoder failure. */
async function readable(file: string, what: string, options?: LocalOutputOptions) {
  try {
    const { stderr } = await runFfmpeg(['-i', file, '-map', '0:v:0', '-frames:v', '1', '-f', 'null', '-'], { options, what: `reading ${what}` });
    return parseMediaLog(stderr);
  } catch (err) {
    if (err instanceof LocalOutputError && err.code === 'encoder_failed')
      throw new LocalOutputError('invalid_input', `${what} could not be decoded: ${err.message}`);
    throw err;
  }
}

const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);

interface Restyle {
  prompt: string;
  seed: number;
  strength: number;
  aspectRatio: AspectRatio | undefined;
  seconds: number | undefined;
  maxSeconds: number;
  fps: number;
  longSide: number;
  codec: string[];
}

async function restyle(video: Buffer, job: Restyle, options?: LocalOutputOptions): Promise<VideoFile> {
  return withTempDir(async (dir) => {
    const input = join(dir, 'in.video');
    const out = join(dir, 'out.mp4');
    await writeFile(input, video);

    const source = await readable(input, 'the input video', options);
    if (!source.width || !source.height) throw new LocalOutputError('invalid_input', 'the input video has no video stream of known size');
    const seconds = Math.min(source.durationSeconds ?? job.maxSeconds, job.seconds ?? job.maxSeconds, job.maxSeconds);

    let size: string;
    if (job.aspectRatio) {
      const { width, height } = sizeForAspectRatio(job.aspectRatio, job.longSide, 2);
      size = `scale=${width}:${height}:force_original_aspect_ratio=increase,crop=${width}:${height}`;
    } else {
      const factor = Math.min(1, job.longSide / Math.max(source.width, source.height));
      size = `scale=${even(source.width * factor)}:${even(source.height * factor)}`;
    }

    const s = job.strength;
    const p = job.prompt.toLowerCase();
    let look: string;
    if (/black and white|black-and-white|\bb&w\b|noir|monochrome|gr[ae]yscale/.test(p)) {
      look = `hue=s=${(1 - s).toFixed(3)},eq=contrast=${(1 + 0.5 * s).toFixed(3)}`;
    } else if (/\bnegative\b|\binvert/.test(p)) {
      look = 'negate';
    } else if (/sepia|vintage|old film/.test(p)) {
      const m = (sepia: number, id: number) => (id + (sepia - id) * s).toFixed(3);
      look = `colorchannelmixer=${m(0.393, 1)}:${m(0.769, 0)}:${m(0.189, 0)}:0:${m(0.349, 0)}:${m(0.686, 1)}:${m(0.168, 0)}:0:${m(0.272, 0)}:${m(0.534, 0)}:${m(0.131, 1)}`;
    } else {
      const sign = rng(hashOf('restyle', job.seed, job.prompt))() < 0.5 ? -1 : 1;
      look = `hue=h=${Math.round(sign * 150 * s)}:s=${(1 + 0.3 * s).toFixed(3)}`;
    }

    await runFfmpeg(
      [
        '-loglevel',
        'error',
        '-i',
        input,
        '-map',
        '0:v:0',
        '-t',
        seconds.toFixed(3),
        '-vf',
        `${size},${look},format=yuv420p`,
        '-r',
        String(job.fps),
        ...job.codec,
        out,
      ],
      { options, what: 'video_to_video encoding' },
    );
    const bytes = await readFile(out);
    const { stderr } = await runFfmpeg(['-i', out, '-f', 'null', '-'], { options, what: 'reading the output video' });
    const made = parseMediaLog(stderr);
    if (!made.width || !made.height || made.durationSeconds === undefined)
      throw new LocalOutputError('encoder_failed', 'video_to_video: the encoded video could not be read back');
    return { bytes, contentType: 'video/mp4', mediaType: 'video', width: made.width, height: made.height, durationSeconds: made.durationSeconds };
  }, options);
}
