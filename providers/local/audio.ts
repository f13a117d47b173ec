/**
 * text_to_audio for the local provider: `makeAudio(params, options)` → one `AudioFile`.
 *
 * Params: prompt (required), durationSeconds (> 0, default 3, at most options.maxAudioSeconds,
 * default 30), voice (alloy | ember | sage | nova, default alloy), speed (0.25..4, default 1),
 * format (mp3 | wav | ogg, default mp3), seed.
 *
 * The sound is speech-like: each word of the prompt becomes one tone per syllable (vowel
 * group), pitched by a hash of the word and the seed around the voice's base pitch, with the
 * voice's harmonics, a little vibrato, soft attack/release, pauses between words and longer
 * ones at punctuation; the phrase repeats until durationSeconds is filled exactly, then fades.
 * speed scales syllable and pause lengths. Same params → same samples.
 *
 * Formats: WAV is written here (RIFF, PCM 16-bit mono, options.audioSampleRate, default
 * 22050 Hz). MP3 (libmp3lame, 64 kbit/s CBR) and OGG (libvorbis, q3) are encoded by the bundled
 * ffmpeg, WAV piped in and the encoded stream piped out (no files), with bit-exact flags so
 * the bytes are reproducible too. durationSeconds reported is the PCM length; MP3/OGG decoders
 * may see a few extra milliseconds of encoder padding.
 */
import { endianness } from 'node:os';
import { invalidParam } from './errors.ts';
import { runFfmpeg } from './ffmpeg.ts';
import { hashOf, rng } from './random.ts';
import { DEFAULTS, option, readEnum, readNumber, readSeed, readString, type LocalOutputOptions, type Params } from './params.ts';

export const LOCAL_VOICES = ['alloy', 'ember', 'sage', 'nova'] as const;
export type Voice = (typeof LOCAL_VOICES)[number];
export const LOCAL_AUDIO_FORMATS = ['mp3', 'wav', 'ogg'] as const;
export type AudioFormat = (typeof LOCAL_AUDIO_FORMATS)[number];

export const AUDIO_CONTENT_TYPES: Record<AudioFormat, string> = { mp3: 'audio/mpeg', wav: 'audio/wav', ogg: 'audio/ogg' };

export interface AudioFile {
  bytes: Buffer;
  contentType: string;
  mediaType: 'audio';
  durationSeconds: number;
}

const VOICES: Record<Voice, { base: number; harmonics: number[]; vibrato: number }> = {
  alloy: { base: 150, harmonics: [1, 0.5, 0.3, 0.15], vibrato: 0.012 },
  ember: { base: 110, harmonics: [1, 0.7, 0.45, 0.3, 0.2], vibrato: 0.008 },
  sage: { base: 185, harmonics: [1, 0.35, 0.12], vibrato: 0.015 },
  nova: { base: 230, harmonics: [1, 0.55, 0.4, 0.3, 0.2, 0.1], vibrato: 0.02 },
};

export async function makeAudio(params: Params, options?: LocalOutputOptions): Promise<AudioFile> {
  const prompt = readString(params, 'prompt', { required: true })!;
  const maxSeconds = option(options, 'maxAudioSeconds');
  const durationSeconds = readNumber(params, 'durationSeconds', {
    min: 0,
    max: maxSeconds,
    fallback: Math.min(DEFAULTS.audioSeconds, maxSeconds),
    exclusiveMin: true,
  });
  const voice = readEnum(params, 'voice', LOCAL_VOICES, 'alloy');
  const speed = readNumber(params, 'speed', { min: 0.25, max: 4, fallback: 1 });
  const format = readEnum(params, 'format', LOCAL_AUDIO_FORMATS, 'mp3');
  const seed = readSeed(params, prompt);
  const sampleRate = Math.round(option(options, 'audioSampleRate'));
  if (sampleRate < 8000 || sampleRate > 48000) throw invalidParam('audioSampleRate', 'must be from 8000 to 48000 Hz');

  const samples = synthesize(prompt, voice, speed, seed, durationSeconds, sampleRate);
  const wav = encodeWav(samples, sampleRate);
  const exactSeconds = samples.length / sampleRate;
  if (format === 'wav') return { bytes: wav, contentType: AUDIO_CONTENT_TYPES.wav, mediaType: 'audio', durationSeconds: exactSeconds };

  const codec = format === 'mp3' ? ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'] : ['-c:a', 'libvorbis', '-q:a', '3', '-f', 'ogg'];
  const { stdout } = await runFfmpeg(
    ['-loglevel', 'error', '-f', 'wav', '-i', 'pipe:0', '-map_metadata', '-1', '-fflags', '+bitexact', '-flags:a', '+bitexact', ...codec, 'pipe:1'],
    { input: wav, options, what: `${format.toUpperCase()} encoding` },
  );
  return { bytes: stdout, contentType: AUDIO_CONTENT_TYPES[format], mediaType: 'audio', durationSeconds: exactSeconds };
}

/** RIFF/WAVE, PCM, 16-bit, mono. */
export function encodeWav(samples: Int16Array, sampleRate: number): Buffer {
  const dataBytes = samples.length * 2;
  const out = Buffer.alloc(44 + dataBytes);
  out.write('RIFF', 0, 'latin1');
  out.writeUInt32LE(36 + dataBytes, 4);
  out.write('WAVE', 8, 'latin1');
  out.write('fmt ', 12, 'latin1');
  out.writeUInt32LE(16, 16); // fmt chunk size
  out.writeUInt16LE(1, 20); // PCM
  out.writeUInt16LE(1, 22); // mono
  out.writeUInt32LE(sampleRate, 24);
  out.writeUInt32LE(sampleRate * 2, 28); // byte rate
  out.writeUInt16LE(2, 32); // block align
  out.writeUInt16LE(16, 34); // bits per sample
  out.write('data', 36, 'latin1');
  out.writeUInt32LE(dataBytes, 40);
  if (endianness() === 'LE') Buffer.from(samples.buffer, samples.byteOffset, dataBytes).copy(out, 44);
  else for (let i = 0; i < samples.length; i++) out.writeInt16LE(samples[i]!, 44 + i * 2);
  return out;
}

interface Syllable {
  start: number;
  length: number;
  pitch: number;
  weights: number[];
}

/** The phrase as timed syllables (seconds), and its length including the closing pause. */
function phrase(prompt: string, voice: Voice, speed: number, seed: number): { syllables: Syllable[]; length: number } {
  const { base, harmonics } = VOICES[voice];
  const tokens = prompt.match(/[\p{L}\p{N}']+|[.!?;:,]/gu) ?? [];
  const syllables: Syllable[] = [];
  let t = 0;
  let wordIndex = 0;
  for (const token of tokens) {
    if (/^[.!?;:]$/.test(token)) {
      t += 0.28 / speed;
      continue;
    }
    if (token === ',') {
      t += 0.14 / speed;
      continue;
    }
    const r = rng(hashOf('word', token.toLowerCase(), seed));
    const count = Math.max(1, Math.min(5, (token.match(/[aeiouyàáâäèéêëìíîïòóôöùúûü]+/giu) ?? []).length));
    const declination = 1 - 0.04 * (wordIndex % 6); // pitch drifts down through a clause, as speech does
    for (let s = 0; s < count; s++) {
      const semitones = -3 + r() * 8;
      const length = (0.12 + r() * 0.1) / speed;
      syllables.push({
        start: t,
        length,
        pitch: base * declination * 2 ** (semitones / 12),
        weights: harmonics.map((h, k) => (k === 0 ? h : h * (0.4 + r() * 1.2))),
      });
      t += length + 0.015 / speed;
    }
    t += 0.07 / speed;
    wordIndex++;
  }
  if (syllables.length === 0) {
    syllables.push({ start: 0, length: 0.3 / speed, pitch: base, weights: harmonics });
    t = 0.3 / speed;
  }
  return { syllables, length: t + 0.4 / speed };
}

export function synthesize(prompt: string, voice: Voice, speed: number, seed: number, seconds: number, sampleRate: number): Int16Array {
  const total = Math.max(1, Math.round(seconds * sampleRate));
  const out = new Int16Array(total);
  const { syllables, length } = phrase(prompt, voice, speed, seed);
  const { vibrato } = VOICES[voice];
  const attack = 0.015;
  const release = 0.04;
  const fade = Math.min(total, Math.round(0.03 * sampleRate));

  for (let repeat = 0; repeat * length < seconds; repeat++) {
    for (const syl of syllables) {
      const from = Math.round((repeat * length + syl.start) * sampleRate);
      if (from >= total) break;
      const n = Math.min(Math.round(syl.length * sampleRate), total - from);
      const norm = syl.weights.reduce((a, b) => a + b, 0);
      const weights = syl.weights;
      const gain = (0.6 * 32767) / norm;
      let phase = 0;
      for (let i = 0; i < n; i++) {
        const tt = i / sampleRate;
        const env = Math.min(1, tt / attack, (syl.length - tt) / release);
        const f = syl.pitch * (1 + vibrato * Math.sin(2 * Math.PI * 5.5 * tt));
        phase += (2 * Math.PI * f) / sampleRate;
        // Harmonics by the recurrence sin((k+1)x) = 2 cos x sin(kx) - sin((k-1)x): one sin and one cos a sample.
        const s1 = Math.sin(phase);
        const twoCos = 2 * Math.cos(phase);
        let previous = 0;
        let current = s1;
        let v = weights[0]! * s1;
        for (let k = 1; k < weights.length; k++) {
          const next = twoCos * current - previous;
          previous = current;
          current = next;
          v += weights[k]! * current;
        }
        const at = from + i;
        out[at] = Math.max(-32768, Math.min(32767, out[at]! + Math.round(v * Math.max(0, env) * gain)));
      }
    }
  }
  for (let i = 0; i < fade; i++) out[total - 1 - i] = Math.round(out[total - 1 - i]! * (i / fade));
  return out;
}
