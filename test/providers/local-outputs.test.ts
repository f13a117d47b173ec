import t, { type Test } from 'tap';
import { PNG } from 'pngjs';
import { LOCAL_ASPECT_RATIOS, LocalOutputError, makeOutputs, sniffContentType, type LocalMode, type OutputFile } from '../../providers/local/outputs.ts';
import { decode, fixture } from './support.ts';

const only = (files: OutputFile[]): OutputFile => {
  if (files.length !== 1) throw new Error(`expected one file, got ${files.length}`);
  return files[0]!;
};

/** Asserts the promise rejects with a LocalOutputError of `code` (and `field`, when given). */
async function refuses(t: Test, promise: Promise<unknown>, code: string, field?: string) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof LocalOutputError, `rejects with LocalOutputError (${err instanceof Error ? err.message : String(err)})`);
  if (err instanceof LocalOutputError) {
    t.equal(err.code, code);
    if (field) t.equal(err.field, field);
    t.ok(err.message.length > 10, 'with a message that says why');
  }
}

const IMAGE_SIZES: Record<string, [number, number]> = {
  '1:1': [512, 512],
  '16:9': [512, 288],
  '9:16': [288, 512],
  '4:3': [512, 384],
  '3:4': [384, 512],
  '21:9': [512, 216],
};
const VIDEO_SIZES: Record<string, [number, number]> = {
  '1:1': [320, 320],
  '16:9': [320, 180],
  '9:16': [180, 320],
  '4:3': [320, 240],
  '3:4': [240, 320],
  '21:9': [320, 138],
};

t.test('text_to_text', async (t) => {
  t.test('answers readably, mentioning the prompt, with usage and no files', async (t) => {
    const out = await makeOutputs('text_to_text', { prompt: 'Summarise the plot of Hamlet in two sentences.', seed: 1 });
    t.type(out.text, 'string');
    t.match(out.text, /Hamlet/);
    t.ok(out.text!.split(/\s+/).length >= 10, 'a few sentences');
    t.same(out.files, []);
    t.equal(out.finishReason, 'stop');
    t.equal(out.usage?.completionTokens, out.text!.split(/\s+/).length);
    t.equal(out.usage?.promptTokens, 8);
  });

  t.test('is deterministic for the same seed; the seed varies it; temperature 0 ignores it', async (t) => {
    const params = { prompt: 'How do solar lanterns store energy?', temperature: 1 };
    const a = await makeOutputs('text_to_text', { ...params, seed: 42 });
    const b = await makeOutputs('text_to_text', { ...params, seed: 42 });
    t.equal(a.text, b.text);
    const texts = new Set<string>();
    for (let seed = 0; seed < 8; seed++) texts.add((await makeOutputs('text_to_text', { ...params, seed })).text!);
    t.ok(texts.size > 1, 'different seeds give different phrasings');
    const greedy = new Set<string>();
    for (let seed = 0; seed < 4; seed++) greedy.add((await makeOutputs('text_to_text', { ...params, temperature: 0, seed })).text!);
    t.equal(greedy.size, 1, 'temperature 0 gives one answer whatever the seed');
  });

  t.test('truncates to maxTokens whitespace tokens', async (t) => {
    const out = await makeOutputs('text_to_text', { prompt: 'Explain group commit in databases.', maxTokens: 7, seed: 3 });
    t.equal(out.text!.split(/\s+/).length, 7);
    t.equal(out.finishReason, 'length');
    t.equal(out.usage?.completionTokens, 7);
    const one = await makeOutputs('text_to_text', { prompt: 'Hi there, how are you?', maxTokens: 1 });
    t.equal(one.text!.split(/\s+/).length, 1);
  });

  t.test('carries out simple transformations of the prompt', async (t) => {
    t.equal((await makeOutputs('text_to_text', { prompt: 'reverse: one two three' })).text, 'three two one');
    t.equal((await makeOutputs('text_to_text', { prompt: 'echo: hello world' })).text, 'hello world');
    t.equal((await makeOutputs('text_to_text', { prompt: 'uppercase shout this' })).text, 'SHOUT THIS');
    t.equal((await makeOutputs('text_to_text', { prompt: 'count the words in: a b c d' })).text, 'The text has 4 words.');
  });

  t.test('follows the style the system prompt asks for', async (t) => {
    const json = await makeOutputs('text_to_text', { prompt: 'What is a lighthouse?', systemPrompt: 'Reply in JSON.', seed: 2 });
    const parsed = JSON.parse(json.text!) as { answer: string; keywords: string[] };
    t.match(parsed.answer, /lighthouse/);
    t.ok(parsed.keywords.includes('lighthouse'));
    const list = await makeOutputs('text_to_text', { prompt: 'Tips for baking bread', systemPrompt: 'Answer as a bullet list' });
    t.ok(
      list.text!.split('\n').every((line) => line.startsWith('- ')),
      'every line a bullet',
    );
    const brief = await makeOutputs('text_to_text', { prompt: 'Tips for baking bread', systemPrompt: 'Be concise.' });
    const plain = await makeOutputs('text_to_text', { prompt: 'Tips for baking bread' });
    t.ok(brief.text!.length < plain.text!.length, 'concise is shorter');
  });

  t.test('refuses bad params with the field named', async (t) => {
    await refuses(t, makeOutputs('text_to_text', {}), 'invalid_params', 'prompt');
    await refuses(t, makeOutputs('text_to_text', { prompt: '   ' }), 'invalid_params', 'prompt');
    await refuses(t, makeOutputs('text_to_text', { prompt: 'x', temperature: 2.5 }), 'invalid_params', 'temperature');
    await refuses(t, makeOutputs('text_to_text', { prompt: 'x', maxTokens: 0 }), 'invalid_params', 'maxTokens');
    await refuses(t, makeOutputs('text_to_text', { prompt: 'x', maxTokens: 1.5 }), 'invalid_params', 'maxTokens');
    await refuses(t, makeOutputs('text_to_text', { prompt: 'x', maxTokens: 5000 }), 'invalid_params', 'maxTokens');
    await refuses(t, makeOutputs('text_to_text', { prompt: 'x', seed: -1 }), 'invalid_params', 'seed');
    await refuses(t, makeOutputs('nope' as LocalMode, { prompt: 'x' }), 'invalid_params', 'mode');
  });
});

t.test('text_to_image', async (t) => {
  t.test('makes decodable PNGs of the size of every aspect ratio', async (t) => {
    for (const aspectRatio of LOCAL_ASPECT_RATIOS) {
      const file = only((await makeOutputs('text_to_image', { prompt: 'A lighthouse at dawn', aspectRatio, seed: 5 })).files);
      t.equal(file.contentType, 'image/png');
      t.equal(file.mediaType, 'image');
      t.equal(sniffContentType(file.bytes), 'image/png');
      const png = PNG.sync.read(file.bytes);
      const [width, height] = IMAGE_SIZES[aspectRatio]!;
      t.same([png.width, png.height, file.width, file.height], [width, height, width, height], aspectRatio);
      // Not a flat fill: the picture has a range of colours.
      const reds = new Set<number>();
      for (let i = 0; i < png.data.length; i += 4 * 97) reds.add(png.data[i]!);
      t.ok(reds.size > 10, `${aspectRatio} has varied pixels`);
    }
  });

  t.test('defaults to one square image and honours numImages', async (t) => {
    const one = only((await makeOutputs('text_to_image', { prompt: 'A red fox' })).files);
    t.same([one.width, one.height], [512, 512]);
    const three = (await makeOutputs('text_to_image', { prompt: 'A red fox', numImages: 3, aspectRatio: '3:4', seed: 9 })).files;
    t.equal(three.length, 3);
    for (const file of three) t.same([PNG.sync.read(file.bytes).width, PNG.sync.read(file.bytes).height], [384, 512]);
    t.equal(new Set(three.map((f) => f.bytes.toString('base64'))).size, 3, 'each image differs');
  });

  t.test('is deterministic from seed and prompt', async (t) => {
    const params = { prompt: 'An ocean at night', seed: 77, aspectRatio: '16:9', numImages: 2 };
    const a = await makeOutputs('text_to_image', params);
    const b = await makeOutputs('text_to_image', params);
    t.ok(a.files[0]!.bytes.equals(b.files[0]!.bytes) && a.files[1]!.bytes.equals(b.files[1]!.bytes), 'same bytes');
    const otherSeed = await makeOutputs('text_to_image', { ...params, seed: 78 });
    t.notOk(a.files[0]!.bytes.equals(otherSeed.files[0]!.bytes), 'another seed, another image');
    const otherPrompt = await makeOutputs('text_to_image', { ...params, prompt: 'A forest at noon' });
    t.notOk(a.files[0]!.bytes.equals(otherPrompt.files[0]!.bytes), 'another prompt, another image');
  });

  t.test('takes its long side from the options', async (t) => {
    const file = only((await makeOutputs('text_to_image', { prompt: 'x', aspectRatio: '9:16' }, {}, { imageLongSide: 1024 })).files);
    const png = PNG.sync.read(file.bytes);
    t.same([png.width, png.height], [576, 1024]);
  });

  t.test('refuses bad params', async (t) => {
    await refuses(t, makeOutputs('text_to_image', { prompt: 'x', aspectRatio: '2:1' }), 'invalid_params', 'aspectRatio');
    await refuses(t, makeOutputs('text_to_image', { prompt: 'x', numImages: 0 }), 'invalid_params', 'numImages');
    await refuses(t, makeOutputs('text_to_image', { prompt: 'x', numImages: 11 }), 'invalid_params', 'numImages');
    await refuses(t, makeOutputs('text_to_image', { prompt: 'x', numImages: 2 }, {}, { maxImages: 1 }), 'invalid_params', 'numImages');
    await refuses(t, makeOutputs('text_to_image', { prompt: 42 }), 'invalid_params', 'prompt');
  });
});

t.test('image_to_image', async (t) => {
  const input = only((await makeOutputs('text_to_image', { prompt: 'green meadow', aspectRatio: '16:9', seed: 1 })).files).bytes;

  t.test("derives a PNG from the input, at the input's nearest ratio, strength setting how far", async (t) => {
    const source = PNG.sync.read(input);
    const at = async (strength: number) =>
      PNG.sync.read(only((await makeOutputs('image_to_image', { prompt: 'sunset', strength, seed: 4 }, { images: [input] })).files).bytes);
    const same = await at(0);
    t.same([same.width, same.height], [512, 288], 'a 16:9 input gives a 16:9 output');
    const diff = (a: PNG, b: PNG) => {
      let sum = 0;
      for (let i = 0; i < a.data.length; i++) sum += Math.abs(a.data[i]! - b.data[i]!);
      return sum / a.data.length;
    };
    t.ok(diff(same, source) < 2, 'strength 0 keeps the input');
    const half = await at(0.5);
    const full = await at(1);
    t.ok(diff(half, source) > diff(same, source), 'strength 0.5 departs from it');
    t.ok(diff(full, source) > diff(half, source), 'strength 1 departs further');
  });

  t.test('reads JPEG input too, and honours aspectRatio and numImages', async (t) => {
    const jpeg = await fixture('testsrc2=s=300x400:d=1', ['-frames:v', '1', '-f', 'mjpeg']);
    t.equal(sniffContentType(jpeg), 'image/jpeg');
    const nearest = only((await makeOutputs('image_to_image', { prompt: 'linocut' }, { images: [jpeg] })).files);
    t.same([nearest.width, nearest.height], [384, 512], 'a 3:4 input gives 3:4');
    const files = (await makeOutputs('image_to_image', { prompt: 'linocut', aspectRatio: '21:9', numImages: 2 }, { images: [jpeg, input] })).files;
    t.equal(files.length, 2);
    for (const file of files) {
      const png = PNG.sync.read(file.bytes);
      t.same([png.width, png.height, file.contentType], [512, 216, 'image/png']);
    }
  });

  t.test('is deterministic', async (t) => {
    const params = { prompt: 'watercolour', strength: 0.7, seed: 11 };
    const a = only((await makeOutputs('image_to_image', params, { images: [input] })).files);
    const b = only((await makeOutputs('image_to_image', params, { images: [input] })).files);
    t.ok(a.bytes.equals(b.bytes));
  });

  t.test('refuses missing or unreadable input and bad strength', async (t) => {
    await refuses(t, makeOutputs('image_to_image', { prompt: 'x' }, {}), 'invalid_input');
    await refuses(t, makeOutputs('image_to_image', { prompt: 'x' }, { images: [Buffer.from('not an image at all')] }), 'invalid_input');
    const broken = Buffer.concat([input.subarray(0, 40), Buffer.alloc(100)]);
    await refuses(t, makeOutputs('image_to_image', { prompt: 'x' }, { images: [broken] }), 'invalid_input');
    await refuses(t, makeOutputs('image_to_image', { prompt: 'x', strength: 1.5 }, { images: [input] }), 'invalid_params', 'strength');
  });
});

t.test('text_to_audio', async (t) => {
  t.test('writes a correct 16-bit mono PCM WAV of the requested duration', async (t) => {
    const file = only((await makeOutputs('text_to_audio', { prompt: 'Welcome to the Generation Service.', format: 'wav', durationSeconds: 2.5 })).files);
    t.same([file.contentType, file.mediaType, file.durationSeconds], ['audio/wav', 'audio', 2.5]);
    const b = file.bytes;
    t.equal(b.toString('latin1', 0, 4), 'RIFF');
    t.equal(b.readUInt32LE(4), b.length - 8, 'RIFF size');
    t.equal(b.toString('latin1', 8, 16), 'WAVEfmt ');
    t.equal(b.readUInt32LE(16), 16);
    t.equal(b.readUInt16LE(20), 1, 'PCM');
    t.equal(b.readUInt16LE(22), 1, 'mono');
    const rate = b.readUInt32LE(24);
    t.equal(rate, 22050);
    t.equal(b.readUInt32LE(28), rate * 2, 'byte rate');
    t.equal(b.readUInt16LE(32), 2, 'block align');
    t.equal(b.readUInt16LE(34), 16, 'bits');
    t.equal(b.toString('latin1', 36, 40), 'data');
    const dataBytes = b.readUInt32LE(40);
    t.equal(dataBytes, b.length - 44);
    t.equal(dataBytes / 2 / rate, 2.5, 'duration from the header');
    let energy = 0;
    for (let i = 44; i < b.length; i += 2) energy += b.readInt16LE(i) ** 2;
    t.ok(Math.sqrt(energy / (dataBytes / 2)) > 1000, 'not silence');
    const decoded = await decode(b);
    t.equal(decoded.code, 0, 'ffmpeg decodes it');
    t.same([decoded.audioCodec, decoded.sampleRate], ['pcm_s16le', 22050]);
    t.equal(sniffContentType(b), 'audio/wav');
  });

  t.test('encodes MP3 and OGG that a decoder accepts, of about the requested length', async (t) => {
    for (const [format, contentType, codec] of [
      ['mp3', 'audio/mpeg', 'mp3'],
      ['ogg', 'audio/ogg', 'vorbis'],
    ] as const) {
      const file = only((await makeOutputs('text_to_audio', { prompt: 'Hello there, friend.', format, durationSeconds: 2, voice: 'ember' })).files);
      t.equal(file.contentType, contentType);
      t.equal(sniffContentType(file.bytes), contentType, `${format} sniffs as ${contentType}`);
      t.equal(file.durationSeconds, 2);
      const decoded = await decode(file.bytes);
      t.equal(decoded.code, 0, `ffmpeg decodes the ${format}`);
      t.equal(decoded.audioCodec, codec);
      t.ok(Math.abs(decoded.decodedSeconds! - 2) < 0.15, `${format} decodes to about 2 s (${decoded.decodedSeconds})`);
    }
  });

  t.test('defaults to a 3 s MP3 in the alloy voice', async (t) => {
    const file = only((await makeOutputs('text_to_audio', { prompt: 'Defaults' })).files);
    t.equal(file.contentType, 'audio/mpeg');
    t.equal(file.durationSeconds, 3);
    const explicit = only((await makeOutputs('text_to_audio', { prompt: 'Defaults', format: 'mp3', voice: 'alloy', speed: 1, durationSeconds: 3 })).files);
    t.ok(file.bytes.equals(explicit.bytes));
  });

  t.test('is deterministic; voice, speed, seed and prompt change the sound', async (t) => {
    const params = { prompt: 'The quick brown fox.', format: 'wav', durationSeconds: 1, seed: 3 };
    const wav = async (extra: Record<string, unknown> = {}) => only((await makeOutputs('text_to_audio', { ...params, ...extra })).files).bytes;
    const base = await wav();
    t.ok(base.equals(await wav()), 'same params, same WAV');
    for (const extra of [{ voice: 'nova' }, { voice: 'sage' }, { speed: 1.5 }, { seed: 4 }, { prompt: 'Another sentence here.' }]) {
      t.notOk(base.equals(await wav(extra)), `differs with ${JSON.stringify(extra)}`);
    }
    for (const format of ['mp3', 'ogg']) {
      const a = only((await makeOutputs('text_to_audio', { ...params, format })).files).bytes;
      const b = only((await makeOutputs('text_to_audio', { ...params, format })).files).bytes;
      t.ok(a.equals(b), `same params, same ${format} bytes`);
    }
  });

  t.test('refuses bad params', async (t) => {
    await refuses(t, makeOutputs('text_to_audio', { prompt: 'x', durationSeconds: 31 }), 'invalid_params', 'durationSeconds');
    await refuses(t, makeOutputs('text_to_audio', { prompt: 'x', durationSeconds: 0 }), 'invalid_params', 'durationSeconds');
    await refuses(t, makeOutputs('text_to_audio', { prompt: 'x', durationSeconds: '2' }), 'invalid_params', 'durationSeconds');
    await refuses(t, makeOutputs('text_to_audio', { prompt: 'x', format: 'flac' }), 'invalid_params', 'format');
    await refuses(t, makeOutputs('text_to_audio', { prompt: 'x', voice: 'bob' }), 'invalid_params', 'voice');
    await refuses(t, makeOutputs('text_to_audio', { prompt: 'x', speed: 10 }), 'invalid_params', 'speed');
    await refuses(t, makeOutputs('text_to_audio', { prompt: 'x', durationSeconds: 5 }, {}, { maxAudioSeconds: 4 }), 'invalid_params', 'durationSeconds');
    const longer = only((await makeOutputs('text_to_audio', { prompt: 'x', durationSeconds: 31, format: 'wav' }, {}, { maxAudioSeconds: 40 })).files);
    t.equal(longer.durationSeconds, 31, 'the cap is an option');
  });
});

t.test('text_to_video', async (t) => {
  t.test('makes H.264 MP4s of the requested size and length that a decoder reads', async (t) => {
    // With this prompt, seeds 1-6 cover every scene: painting (1, 3), testsrc2 (2, 6), cellauto (4), life (5).
    const cases: Array<[string, number, number]> = [
      ['16:9', 2, 1],
      ['9:16', 1.5, 2],
      ['21:9', 1, 3],
      ['1:1', 1, 4],
      ['4:3', 1, 5],
      ['3:4', 1, 6],
    ];
    for (const [aspectRatio, durationSeconds, seed] of cases) {
      const file = only((await makeOutputs('text_to_video', { prompt: 'Waves rolling onto a pebble beach', aspectRatio, durationSeconds, seed })).files);
      const [width, height] = VIDEO_SIZES[aspectRatio]!;
      t.same([file.contentType, file.mediaType, file.width, file.height, file.durationSeconds], ['video/mp4', 'video', width, height, durationSeconds]);
      t.equal(sniffContentType(file.bytes), 'video/mp4');
      const decoded = await decode(file.bytes);
      t.equal(decoded.code, 0, `ffmpeg decodes the ${aspectRatio} video (seed ${seed}) from a pipe`);
      t.same([decoded.videoCodec, decoded.width, decoded.height], ['h264', width, height]);
      t.ok(Math.abs(decoded.durationSeconds! - durationSeconds) < 0.1, `lasts ${durationSeconds} s (${decoded.durationSeconds})`);
    }
  });

  t.test('defaults to 2 s square; is deterministic from the seed', async (t) => {
    const a = only((await makeOutputs('text_to_video', { prompt: 'A quiet harbour', seed: 8 })).files);
    t.same([a.width, a.height, a.durationSeconds], [320, 320, 2]);
    const b = only((await makeOutputs('text_to_video', { prompt: 'A quiet harbour', seed: 8 })).files);
    t.ok(a.bytes.equals(b.bytes), 'same seed, same bytes');
  });

  t.test('refuses bad params', async (t) => {
    await refuses(t, makeOutputs('text_to_video', { prompt: 'x', durationSeconds: 11 }), 'invalid_params', 'durationSeconds');
    await refuses(t, makeOutputs('text_to_video', { prompt: 'x', durationSeconds: -1 }), 'invalid_params', 'durationSeconds');
    await refuses(t, makeOutputs('text_to_video', { prompt: 'x', aspectRatio: '5:4' }), 'invalid_params', 'aspectRatio');
    await refuses(t, makeOutputs('text_to_video', { durationSeconds: 1 }), 'invalid_params', 'prompt');
  });
});

t.test('image_to_video', async (t) => {
  const still = only((await makeOutputs('text_to_image', { prompt: 'autumn forest', aspectRatio: '4:3', seed: 2 })).files).bytes;

  t.test('animates the input image (pan, or zoom when asked) at its nearest ratio', async (t) => {
    for (const prompt of ['Slow zoom in', 'drift across']) {
      const file = only((await makeOutputs('image_to_video', { prompt, durationSeconds: 1 }, { images: [still] })).files);
      t.same([file.contentType, file.width, file.height, file.durationSeconds], ['video/mp4', 320, 240, 1]);
      const decoded = await decode(file.bytes);
      t.equal(decoded.code, 0, `ffmpeg decodes it (${prompt})`);
      t.same([decoded.width, decoded.height], [320, 240]);
      t.ok(Math.abs(decoded.durationSeconds! - 1) < 0.1);
    }
  });

  t.test('takes JPEG input and an explicit aspectRatio; a prompt is optional', async (t) => {
    const jpeg = await fixture('testsrc2=s=640x360:d=1', ['-frames:v', '1', '-f', 'mjpeg']);
    const file = only((await makeOutputs('image_to_video', { aspectRatio: '9:16', durationSeconds: 1 }, { images: [jpeg] })).files);
    t.same([file.width, file.height], [180, 320]);
    t.equal((await decode(file.bytes)).code, 0);
  });

  t.test('refuses missing or unreadable input', async (t) => {
    await refuses(t, makeOutputs('image_to_video', { prompt: 'x' }, {}), 'invalid_input');
    await refuses(t, makeOutputs('image_to_video', { prompt: 'x' }, { images: [Buffer.from('garbage bytes here')] }), 'invalid_input');
    const broken = Buffer.concat([still.subarray(0, 60), Buffer.alloc(200, 7)]);
    await refuses(t, makeOutputs('image_to_video', { prompt: 'x' }, { images: [broken] }), 'invalid_input');
  });
});

t.test('video_to_video', async (t) => {
  const source = only((await makeOutputs('text_to_video', { prompt: 'city lights', aspectRatio: '16:9', durationSeconds: 2, seed: 2 })).files).bytes;

  t.test('re-encodes the input through a filter the prompt picks, reporting real size and length', async (t) => {
    for (const prompt of ['Film noir, black and white', 'a negative', 'sepia vintage', 'dreamy pastel']) {
      const file = only((await makeOutputs('video_to_video', { prompt, strength: 0.8, durationSeconds: 1.5 }, { videos: [source] })).files);
      t.same([file.contentType, file.mediaType, file.width, file.height], ['video/mp4', 'video', 320, 180], prompt);
      t.ok(Math.abs(file.durationSeconds! - 1.5) < 0.1, `reports about 1.5 s (${file.durationSeconds})`);
      t.notOk(file.bytes.equals(source));
      const decoded = await decode(file.bytes);
      t.equal(decoded.code, 0, `ffmpeg decodes it (${prompt})`);
      t.ok(Math.abs(decoded.durationSeconds! - 1.5) < 0.1);
    }
  });

  t.test('keeps the whole input when no duration is asked, and reads WEBM input scaled down to the long side', async (t) => {
    const whole = only((await makeOutputs('video_to_video', { prompt: 'x' }, { videos: [source] })).files);
    t.ok(Math.abs(whole.durationSeconds! - 2) < 0.1, `about 2 s (${whole.durationSeconds})`);
    const webm = await fixture('testsrc2=s=640x480:r=10:d=1', ['-c:v', 'libvpx', '-b:v', '200k', '-f', 'webm']);
    t.equal(sniffContentType(webm), 'video/webm');
    const file = only((await makeOutputs('video_to_video', { prompt: 'x' }, { videos: [webm] })).files);
    t.same([file.width, file.height], [320, 240]);
    t.equal((await decode(file.bytes)).code, 0);
    const cropped = only((await makeOutputs('video_to_video', { prompt: 'x', aspectRatio: '1:1' }, { videos: [webm] })).files);
    t.same([cropped.width, cropped.height], [320, 320]);
  });

  t.test('refuses missing or unreadable input and bad params', async (t) => {
    await refuses(t, makeOutputs('video_to_video', { prompt: 'x' }, {}), 'invalid_input');
    await refuses(t, makeOutputs('video_to_video', { prompt: 'x' }, { videos: [Buffer.from('this is not a video')] }), 'invalid_input');
    await refuses(t, makeOutputs('video_to_video', { prompt: 'x', durationSeconds: 12 }, { videos: [source] }), 'invalid_params', 'durationSeconds');
    await refuses(t, makeOutputs('video_to_video', { prompt: 'x', strength: -0.1 }, { videos: [source] }), 'invalid_params', 'strength');
  });
});
