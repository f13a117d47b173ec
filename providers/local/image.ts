/**
 * Images for the local provider (text_to_image, image_to_image), always PNG.
 *
 * `makeImages(mode, params, inputImages, options)` → `ImageFile[]`, one per numImages.
 * Params: prompt, negativePrompt, seed, aspectRatio (default 1:1; for image_to_image the
 * ratio nearest the input's), numImages 1..options.maxImages (default 1), strength 0..1
 * (image_to_image, default 0.6). Size: the long side is options.imageLongSide (default 512),
 * the short side follows the ratio (rounded to a multiple of 8): 1:1 512x512, 16:9 512x288,
 * 9:16 288x512, 4:3 512x384, 3:4 384x512, 21:9 512x216.
 *
 * text_to_image paints an abstract picture: a palette whose hue comes from colour words in the
 * prompt (red, ocean, forest, sunset, night, …; words in negativePrompt push their hue away)
 * or from the prompt's hash, laid out as a blend of an angled gradient, soft sine waves and a
 * glow. Everything comes from a PRNG seeded by seed + prompt + negativePrompt + image index, so
 * the same params give byte-identical PNGs and each of numImages differs.
 *
 * image_to_image decodes the input (PNG, JPEG, GIF, WEBP, … whatever ffmpeg reads) to the
 * output size, scaled to cover and centre-cropped, and blends it with that picture (whose seed
 * also takes a hash of the input bytes): out = input * (1 - strength) + picture * strength.
 * strength 0 returns the input resized; 1 the picture alone. With several input images, output
 * i is made from input i mod n.
 */
import { LocalOutputError } from './errors.ts';
import { runFfmpeg } from './ffmpeg.ts';
import { encodePng } from './png.ts';
import { hashOf, rng, type Rng } from './random.ts';
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

export interface ImageFile {
  bytes: Buffer;
  contentType: 'image/png';
  mediaType: 'image';
  width: number;
  height: number;
}

export async function makeImages(
  mode: 'text_to_image' | 'image_to_image',
  params: Params,
  inputImages: Buffer[] | undefined,
  options?: LocalOutputOptions,
): Promise<ImageFile[]> {
  const prompt = readString(params, 'prompt', { required: mode === 'text_to_image' }) ?? '';
  const negativePrompt = readString(params, 'negativePrompt') ?? '';
  const seed = readSeed(params, prompt);
  const numImages = readNumber(params, 'numImages', { min: 1, max: option(options, 'maxImages'), fallback: 1, integer: true });
  const longSide = option(options, 'imageLongSide');

  if (mode === 'text_to_image') {
    const { width, height } = sizeForAspectRatio(readAspectRatio(params, '1:1'), longSide, 8);
    const outputs: ImageFile[] = [];
    for (let i = 0; i < numImages; i++) {
      outputs.push(await png(width, height, paint(width, height, prompt, negativePrompt, hashOf('image', seed, prompt, negativePrompt, i))));
    }
    return outputs;
  }

  const strength = readNumber(params, 'strength', { min: 0, max: 1, fallback: DEFAULTS.strength });
  if (!inputImages?.length) throw new LocalOutputError('invalid_input', 'image_to_image needs at least one input image');
  const first = imageDimensions(inputImages[0]!);
  const fallbackRatio: AspectRatio = first ? nearestAspectRatio(first.width, first.height) : '1:1';
  const { width, height } = sizeForAspectRatio(readAspectRatio(params, fallbackRatio), longSide, 8);

  const decoded = new Map<number, Buffer>();
  const outputs: ImageFile[] = [];
  for (let i = 0; i < numImages; i++) {
    const index = i % inputImages.length;
    const input = inputImages[index]!;
    let pixels = decoded.get(index);
    if (!pixels) {
      pixels = await decodeImage(input, width, height, index, options);
      decoded.set(index, pixels);
    }
    const picture = paint(width, height, prompt, negativePrompt, hashOf('image', seed, prompt, negativePrompt, i, hashOf(input)));
    const out = Buffer.alloc(picture.length);
    for (let p = 0; p < out.length; p++) out[p] = Math.round(pixels[p]! * (1 - strength) + picture[p]! * strength);
    outputs.push(await png(width, height, out));
  }
  return outputs;
}

const png = async (width: number, height: number, rgb: Uint8Array): Promise<ImageFile> => ({
  bytes: await encodePng(width, height, rgb),
  contentType: 'image/png',
  mediaType: 'image',
  width,
  height,
});

/** Any image ffmpeg reads, scaled to cover width x height and centre-cropped, as RGB bytes. */
async function decodeImage(bytes: Buffer, width: number, height: number, index: number, options?: LocalOutputOptions): Promise<Buffer> {
  const type = sniffContentType(bytes);
  if (!type?.startsWith('image/')) throw new LocalOutputError('invalid_input', `input image ${index} is not a recognised image (PNG, JPEG, GIF or WEBP)`);
  let stdout: Buffer;
  try {
    ({ stdout } = await runFfmpeg(
      [
        '-loglevel',
        'error',
        '-i',
        'pipe:0',
        '-frames:v',
        '1',
        '-vf',
        `scale=${width}:${height}:force_original_aspect_ratio=increase,crop=${width}:${height}`,
        '-f',
        'rawvideo',
        '-pix_fmt',
        'rgb24',
        'pipe:1',
      ],
      { input: bytes, options, what: `decoding input image ${index}` },
    ));
  } catch (err) {
    if (err instanceof LocalOutputError && err.code === 'encoder_failed')
      throw new LocalOutputError('invalid_input', `input image ${index} (${type}) could not be decoded: ${err.message}`);
    throw err;
  }
  if (stdout.length !== width * height * 3)
    throw new LocalOutputError('invalid_input', `input image ${index} (${type}) decoded to ${stdout.length} bytes, expected ${width * height * 3}`);
  return stdout;
}

// Hue (degrees) and lightness hints of words a prompt may contain.
const COLOUR_WORDS: Array<[RegExp, number, number?]> = [
  [/\b(red|crimson|scarlet|fire|ruby)\b/, 0],
  [/\b(orange|autumn|amber|sunset|rust)\b/, 28, 0.55],
  [/\b(yellow|gold|golden|sun|sunny|lemon|sand|desert)\b/, 48, 0.6],
  [/\b(green|forest|leaf|leaves|grass|jungle|moss|meadow)\b/, 120],
  [/\b(teal|turquoise|lagoon|mint)\b/, 170],
  [/\b(blue|ocean|sea|sky|water|lake|rain|ice|winter)\b/, 212],
  [/\b(night|midnight|space|galaxy|stars|dark)\b/, 235, 0.22],
  [/\b(purple|violet|lavender|plum)\b/, 275],
  [/\b(pink|rose|blossom|dawn|candy)\b/, 335, 0.65],
];

function hueOf(text: string): { hue: number; light?: number } | undefined {
  const lower = text.toLowerCase();
  for (const [re, hue, light] of COLOUR_WORDS) if (re.test(lower)) return light === undefined ? { hue } : { hue, light };
  return undefined;
}

function hsl(h: number, s: number, l: number): [number, number, number] {
  const hue = (((h % 360) + 360) % 360) / 60;
  const c = (1 - Math.abs(2 * l - 1)) * s;
  const x = c * (1 - Math.abs((hue % 2) - 1));
  const [r, g, b] = hue < 1 ? [c, x, 0] : hue < 2 ? [x, c, 0] : hue < 3 ? [0, c, x] : hue < 4 ? [0, x, c] : hue < 5 ? [x, 0, c] : [c, 0, x];
  const m = l - c / 2;
  return [(r + m) * 255, (g + m) * 255, (b + m) * 255];
}

/** An abstract picture as RGB bytes, fully determined by its arguments. */
export function paint(width: number, height: number, prompt: string, negativePrompt: string, seed: number): Buffer {
  const r: Rng = rng(seed);
  const hint = hueOf(prompt);
  let hue = hint?.hue ?? r() * 360;
  const avoid = hueOf(negativePrompt);
  if (avoid && Math.abs(((hue - avoid.hue + 540) % 360) - 180) < 45) hue += 180;
  hue += (r() - 0.5) * 24;
  const light = hint?.light ?? 0.35 + r() * 0.3;
  const spread = 25 + r() * 70;
  const stops = [
    hsl(hue - spread, 0.55 + r() * 0.3, Math.max(0.08, light - 0.25)),
    hsl(hue, 0.6 + r() * 0.3, light),
    hsl(hue + spread, 0.5 + r() * 0.4, Math.min(0.92, light + 0.3)),
  ] as const;

  const angle = r() * Math.PI * 2;
  const [gx, gy] = [Math.cos(angle), Math.sin(angle)];
  const waves = Array.from({ length: 3 }, () => ({ fx: (r() - 0.5) * 14, fy: (r() - 0.5) * 14, phase: r() * Math.PI * 2 }));
  const glow = { x: 0.2 + r() * 0.6, y: 0.15 + r() * 0.5, radius: 0.15 + r() * 0.25, strength: 0.25 + r() * 0.3 };

  // Per column and per row terms, so the pixel loop has no trigonometry:
  // sin(a + b) = sin a cos b + cos a sin b, and the gradient is a sum of an x and a y part.
  const scale = Math.max(width, height);
  const columns = Array.from({ length: waves.length }, () => ({ sin: new Float64Array(width), cos: new Float64Array(width) }));
  const gradX = new Float64Array(width);
  const glowX = new Float64Array(width);
  for (let x = 0; x < width; x++) {
    const u = x / scale;
    gradX[x] = (u - 0.5) * gx;
    glowX[x] = ((u - glow.x) / glow.radius) ** 2;
    waves.forEach((w, i) => {
      columns[i]!.sin[x] = Math.sin(u * w.fx);
      columns[i]!.cos[x] = Math.cos(u * w.fx);
    });
  }
  // A 256-entry palette lookup for t in [0, 1].
  const lut = new Uint8Array(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    const [a, b, k] = t < 0.5 ? [stops[0], stops[1], t * 2] : [stops[1], stops[2], (t - 0.5) * 2];
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(a[c]! + (b[c]! - a[c]!) * k);
  }

  const out = Buffer.alloc(width * height * 3);
  let o = 0;
  for (let y = 0; y < height; y++) {
    const v = y / scale;
    const gradY = (v - 0.5) * gy;
    const glowY = ((v - glow.y) / glow.radius) ** 2;
    const rowSin = waves.map((w) => Math.sin(v * w.fy + w.phase));
    const rowCos = waves.map((w) => Math.cos(v * w.fy + w.phase));
    for (let x = 0; x < width; x++) {
      let wave = 0;
      for (let i = 0; i < waves.length; i++) wave += columns[i]!.sin[x]! * rowCos[i]! + columns[i]!.cos[x]! * rowSin[i]!;
      const gradient = 0.5 + (gradX[x]! + gradY) * 0.9;
      const light = Math.max(0, 1 - (glowX[x]! + glowY)) * glow.strength;
      const t = Math.min(1, Math.max(0, gradient * 0.65 + (wave / 6 + 0.5) * 0.35 + light));
      const at = Math.round(t * 255) * 3;
      out[o++] = lut[at]!;
      out[o++] = lut[at + 1]!;
      out[o++] = lut[at + 2]!;
    }
  }
  return out;
}
