import t from 'tap';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { LOCAL_ASPECT_RATIOS, LocalOutputError, imageDimensions, makeOutputs, sizeForAspectRatio, sniffContentType } from '../../providers/local/outputs.ts';
import { encodePng } from '../../providers/local/png.ts';
import { truncateTokens } from '../../providers/local/text.ts';
import { fixture } from './support.ts';

t.test('sniffContentType names real files by their magic bytes', async (t) => {
  const still = 'testsrc2=s=64x48:d=1';
  const clip = 'testsrc2=s=64x48:r=10:d=0.5';
  const tone = 'sine=f=440:d=0.5';
  const files: Array<[string, Promise<Buffer>]> = [
    ['image/png', fixture(still, ['-frames:v', '1', '-f', 'image2pipe', '-c:v', 'png'])],
    ['image/jpeg', fixture(still, ['-frames:v', '1', '-f', 'mjpeg'])],
    ['image/gif', fixture(still, ['-frames:v', '1', '-f', 'gif'])],
    ['image/webp', fixture(still, ['-frames:v', '1', '-c:v', 'libwebp', '-f', 'webp'])],
    ['audio/wav', fixture(tone, ['-f', 'wav'])],
    ['audio/mpeg', fixture(tone, ['-c:a', 'libmp3lame', '-f', 'mp3'])],
    ['audio/mpeg', fixture(tone, ['-c:a', 'libmp3lame', '-id3v2_version', '0', '-write_xing', '0', '-f', 'mp3'])],
    ['audio/ogg', fixture(tone, ['-c:a', 'libvorbis', '-f', 'ogg'])],
    ['video/mp4', fixture(clip, ['-c:v', 'libx264', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mp4'])],
    ['video/quicktime', fixture(clip, ['-c:v', 'libx264', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mov'])],
    ['video/webm', fixture(clip, ['-c:v', 'libvpx', '-f', 'webm'])],
    ['video/x-matroska', fixture(clip, ['-c:v', 'libx264', '-f', 'matroska'])],
  ];
  for (const [type, bytes] of files) t.equal(sniffContentType(await bytes), type, type);

  const m4a = Buffer.concat([Buffer.from([0, 0, 0, 0x20]), Buffer.from('ftypM4A \0\0\0\0isom', 'latin1')]);
  t.equal(sniffContentType(m4a), 'audio/mp4');
  t.equal(sniffContentType(Buffer.alloc(0)), undefined, 'empty');
  t.equal(sniffContentType(Buffer.from('hello, world')), undefined, 'text');
  t.equal(sniffContentType(Buffer.from([0xff, 0xf1, 0x50, 0x80])), undefined, 'AAC ADTS is not MP3');
  t.equal(sniffContentType(Buffer.from('RIFF')), undefined, 'a truncated RIFF');
  t.equal(sniffContentType(Buffer.from([0x89, 0x50, 0x4e])), undefined, 'a truncated PNG signature');
});

t.test('imageDimensions reads sizes from headers', async (t) => {
  const still = 'testsrc2=s=122x44:d=1'; // testsrc2 keeps sizes even
  t.same(imageDimensions(await fixture(still, ['-frames:v', '1', '-f', 'image2pipe', '-c:v', 'png'])), { width: 122, height: 44 });
  t.same(imageDimensions(await fixture(still, ['-frames:v', '1', '-f', 'gif'])), { width: 122, height: 44 });
  t.same(imageDimensions(await fixture(still, ['-frames:v', '1', '-c:v', 'libwebp', '-f', 'webp'])), { width: 122, height: 44 });
  t.same(imageDimensions(await fixture(still, ['-frames:v', '1', '-c:v', 'libwebp', '-lossless', '1', '-f', 'webp'])), { width: 122, height: 44 });
  t.same(imageDimensions(await fixture('testsrc2=s=124x46:d=1', ['-frames:v', '1', '-f', 'mjpeg'])), { width: 124, height: 46 });
  t.equal(imageDimensions(Buffer.from('nothing')), undefined);
  t.equal(imageDimensions(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10])), undefined, 'a truncated JPEG');
});

t.test('encodePng writes PNGs an independent decoder accepts, CRCs included', async (t) => {
  for (const [width, height] of [
    [1, 1],
    [3, 2],
    [17, 9],
  ] as const) {
    const rgb = Buffer.alloc(width * height * 3);
    for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 37) & 0xff;
    const png = PNG.sync.read(await encodePng(width, height, rgb), { checkCRC: true });
    t.same([png.width, png.height], [width, height]);
    for (let p = 0; p < width * height; p++) {
      if (png.data[p * 4] !== rgb[p * 3] || png.data[p * 4 + 1] !== rgb[p * 3 + 1] || png.data[p * 4 + 2] !== rgb[p * 3 + 2] || png.data[p * 4 + 3] !== 255) {
        t.fail(`pixel ${p} of ${width}x${height} differs`);
        return;
      }
    }
  }
  await t.rejects(encodePng(2, 2, Buffer.alloc(5)), RangeError);
});

t.test('aspect ratios map to concrete sizes', async (t) => {
  t.same(
    LOCAL_ASPECT_RATIOS.map((r) => sizeForAspectRatio(r, 512, 8)),
    [
      { width: 512, height: 512 },
      { width: 512, height: 288 },
      { width: 288, height: 512 },
      { width: 512, height: 384 },
      { width: 384, height: 512 },
      { width: 512, height: 216 },
    ],
  );
  t.same(sizeForAspectRatio('21:9', 320, 2), { width: 320, height: 138 });
  t.same(sizeForAspectRatio('16:9', 1024, 8), { width: 1024, height: 576 });
});

t.test('truncateTokens keeps the whitespace between the tokens it keeps', async (t) => {
  t.same(truncateTokens('- a b\n- c d', 3), { text: '- a b', truncated: true });
  t.same(truncateTokens('  one  two ', 5), { text: '  one  two', truncated: false });
  t.same(truncateTokens('one two', 2), { text: 'one two', truncated: false });
});

t.test('ffmpeg trouble ends in a clear error, and work folders are removed', async (t) => {
  const tempDir = await mkdtemp(join(tmpdir(), 'provider-test-'));
  t.teardown(() => rm(tempDir, { recursive: true, force: true }));
  const expectCode = async (promise: Promise<unknown>, code: string) => {
    const err = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof LocalOutputError, String(err));
    t.equal((err as LocalOutputError).code, code, (err as Error).message);
  };

  const audio = { prompt: 'hello', format: 'mp3' };
  await expectCode(makeOutputs('text_to_audio', audio, {}, { ffmpegPath: join(tempDir, 'no-such-ffmpeg') }), 'encoder_unavailable');
  await expectCode(makeOutputs('text_to_audio', audio, {}, { ffmpegPath: '/bin/false' }), 'encoder_failed');
  await expectCode(makeOutputs('text_to_audio', audio, {}, { ffmpegTimeoutMs: 1 }), 'encoder_timeout');
  await expectCode(makeOutputs('text_to_video', { prompt: 'x' }, {}, { ffmpegTimeoutMs: 1, tempDir }), 'encoder_timeout');

  // Params are checked before ffmpeg is touched, so a bad param is reported as such.
  await expectCode(makeOutputs('text_to_video', { prompt: 'x', durationSeconds: 20 }, {}, { ffmpegPath: '/bin/false' }), 'invalid_params');
  await expectCode(makeOutputs('video_to_video', { prompt: 'x', strength: 2 }, { videos: [Buffer.from('x')] }, { ffmpegPath: '/bin/false' }), 'invalid_params');

  // WAV and PNG need no ffmpeg at all.
  const wav = await makeOutputs('text_to_audio', { ...audio, format: 'wav' }, {}, { ffmpegPath: '/bin/false' });
  t.equal(wav.files[0]?.contentType, 'audio/wav');
  const png = await makeOutputs('text_to_image', { prompt: 'x' }, {}, { ffmpegPath: '/bin/false' });
  t.equal(png.files[0]?.contentType, 'image/png');

  await makeOutputs('text_to_video', { prompt: 'x', durationSeconds: 0.5 }, {}, { tempDir });
  await expectCode(makeOutputs('video_to_video', { prompt: 'x' }, { videos: [Buffer.from('junk')] }, { tempDir }), 'invalid_input');
  t.same(await readdir(tempDir), [], 'no work folder is left behind, after success or failure');
});

t.test('the token helpers scan as the regular expression \\S+ splits: every kind of whitespace, any cut', async (t) => {
  const { countTokens } = await import('../../providers/local/text.ts');
  const pieces = ['a', 'bé', '日本', '😀', ' ', '  ', '\t', '\n', '\u00a0', '\u2003', '\u3000', '\ufeff', '\u200b', '-', '.'];
  let seed = 7;
  const next = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed;
  };
  const byRegex = (text: string, max: number) => {
    const re = /\S+/g;
    let count = 0;
    let end = 0;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      if (count === max) return { text: text.slice(0, end), truncated: true };
      count++;
      end = m.index + m[0].length;
    }
    return { text: text.slice(0, end), truncated: false };
  };
  let checked = 0;
  for (let n = 0; n < 500; n++) {
    const text = Array.from({ length: next() % 12 }, () => pieces[next() % pieces.length]).join('');
    const max = next() % 6;
    if (countTokens(text) !== (text.match(/\S+/g) ?? []).length) t.fail(`countTokens(${JSON.stringify(text)})`);
    const cut = truncateTokens(text, max);
    const expected = byRegex(text, max);
    if (cut.text !== expected.text || cut.truncated !== expected.truncated) t.fail(`truncateTokens(${JSON.stringify(text)}, ${max})`);
    checked++;
  }
  t.equal(checked, 500, 'as the regular expression on 500 texts');
  t.equal(countTokens(' one\u00a0two\u2028three '), 3);
  t.equal(countTokens(''), 0);
  t.equal(countTokens('one\u200btwo'), 1, 'a zero-width space is no whitespace to \\s');
});
