import t from 'tap';
import { canonicalContentType, contentTypeOfFilename, imageSize, sniffContentType } from '../../persistence/assets/media.ts';
import { makePng } from '../helpers/files.ts';

const ascii = (text: string) => Buffer.from(text, 'latin1');
const bytes = (...parts: Array<string | number[] | Buffer>) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? ascii(p) : Buffer.from(p))));

function gif(width: number, height: number) {
  const b = bytes('GIF89a', [0, 0, 0, 0], Buffer.alloc(10));
  b.writeUInt16LE(width, 6);
  b.writeUInt16LE(height, 8);
  return b;
}

function jpeg(width: number, height: number) {
  const app0 = bytes([0xff, 0xe0, 0x00, 0x10], 'JFIF\0', Buffer.alloc(9));
  const sof = Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, 0, 0, 0, 0, 0x03, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
  sof.writeUInt16BE(height, 5);
  sof.writeUInt16BE(width, 7);
  return bytes([0xff, 0xd8], app0, sof);
}

function webpLossless(width: number, height: number) {
  const b = bytes('RIFF', [0, 0, 0, 0], 'WEBP', 'VP8L', [0, 0, 0, 0], [0x2f], [0, 0, 0, 0], Buffer.alloc(10));
  b.writeUInt32LE((width - 1) | ((height - 1) << 14), 21);
  return b;
}

function webpExtended(width: number, height: number) {
  const b = bytes('RIFF', [0, 0, 0, 0], 'WEBP', 'VP8X', [10, 0, 0, 0], Buffer.alloc(4), Buffer.alloc(6), Buffer.alloc(4));
  b.writeUIntLE(width - 1, 24, 3);
  b.writeUIntLE(height - 1, 27, 3);
  return b;
}

t.test('the first bytes tell each supported type', async (t) => {
  const cases: Array<[string, Buffer, string | undefined]> = [
    ['PNG', makePng(), 'image/png'],
    ['JPEG', jpeg(10, 20), 'image/jpeg'],
    ['GIF', gif(3, 4), 'image/gif'],
    ['WebP', webpLossless(5, 6), 'image/webp'],
    ['WAV', bytes('RIFF', [0, 0, 0, 0], 'WAVEfmt '), 'audio/wav'],
    ['MP4', bytes([0, 0, 0, 24], 'ftypisom', Buffer.alloc(8)), 'video/mp4'],
    ['MOV', bytes([0, 0, 0, 20], 'ftypqt  ', Buffer.alloc(8)), 'video/quicktime'],
    ['old MOV', bytes([0, 0, 0, 8], 'wide', Buffer.alloc(8)), 'video/quicktime'],
    ['M4A audio is not a video', bytes([0, 0, 0, 24], 'ftypM4A ', Buffer.alloc(8)), undefined],
    ['WebM', bytes([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84], 'webm'), 'video/webm'],
    ['Matroska is not WebM', bytes([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x82, 0x88], 'matroska'), undefined],
    ['MP3 with ID3', bytes('ID3', [4, 0, 0, 0, 0, 0, 0]), 'audio/mpeg'],
    ['MP3 frame', Buffer.from([0xff, 0xfb, 0x90, 0x64]), 'audio/mpeg'],
    ['Ogg', bytes('OggS', [0, 2]), 'audio/ogg'],
    ['text', ascii('hello world, this is text'), undefined],
    ['HTML', ascii('<!doctype html><script>'), undefined],
    ['empty', Buffer.alloc(0), undefined],
    ['a truncated PNG signature', makePng().subarray(0, 5), undefined],
  ];
  for (const [label, data, expected] of cases) t.equal(sniffContentType(data), expected, label);
});

t.test('image sizes from headers', async (t) => {
  t.same(imageSize(makePng(640, 480), 'image/png'), { width: 640, height: 480 });
  t.same(imageSize(gif(33, 44), 'image/gif'), { width: 33, height: 44 });
  t.same(imageSize(jpeg(1920, 1080), 'image/jpeg'), { width: 1920, height: 1080 });
  t.same(imageSize(webpLossless(300, 200), 'image/webp'), { width: 300, height: 200 });
  t.same(imageSize(webpExtended(4000, 3000), 'image/webp'), { width: 4000, height: 3000 });
  t.equal(imageSize(makePng().subarray(0, 20), 'image/png'), undefined, 'too short');
  t.equal(imageSize(jpeg(10, 10).subarray(0, 12), 'image/jpeg'), undefined, 'no frame header in the bytes read');
});

t.test('declared types and file names', async (t) => {
  t.equal(canonicalContentType('IMAGE/PNG'), 'image/png');
  t.equal(canonicalContentType('image/jpg'), 'image/jpeg');
  t.equal(canonicalContentType('audio/x-wav; codecs=1'), 'audio/wav');
  t.equal(canonicalContentType('text/html'), undefined);
  t.equal(canonicalContentType('image/svg+xml'), undefined, 'SVG (scriptable) is not kept');
  t.equal(contentTypeOfFilename('Photo.JPEG'), 'image/jpeg');
  t.equal(contentTypeOfFilename('clip.mov'), 'video/quicktime');
  t.equal(contentTypeOfFilename('notes.txt'), undefined);
  t.equal(contentTypeOfFilename('no-extension'), undefined);
});
