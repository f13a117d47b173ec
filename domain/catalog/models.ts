import type { TSchema } from '@sinclair/typebox';
import type { PlanId } from '../plans.ts';
import { Param, paramsSchema } from './params.ts';

export const MODES = ['text_to_text', 'text_to_image', 'text_to_video', 'text_to_audio', 'image_to_image', 'image_to_video', 'video_to_video'] as const;
export type Mode = (typeof MODES)[number];

export interface ModelRecord {
  id: string;
  name: string;
  mode: Mode;
  /** Which adapter runs it: the embedded `local` provider or an OpenAI-compatible server. */
  provider: 'local' | 'openai';
  maker: string;
  description: string;
  /** Credits per unit; the unit is the job, each image, or each started second of output. */
  pricing: { credits: number; per: 'job' | 'image' | 'second' };
  plans: PlanId[];
  parameterSchema: TSchema;
  sample: { prompt: string; note: string };
}

const ALL: PlanId[] = ['free', 'pro', 'team'];
const PAID: PlanId[] = ['pro', 'team'];

/** The model catalog: data, read once at start-up. */
export const MODELS: ModelRecord[] = [
  {
    id: 'local/text-mini', name: 'Text Mini', mode: 'text_to_text', provider: 'local', maker: 'local',
    description: 'Fast, small text model for drafts and tests.',
    pricing: { credits: 1, per: 'job' }, plans: ALL,
    parameterSchema: paramsSchema({ prompt: Param.prompt, systemPrompt: Param.systemPrompt, temperature: Param.temperature, maxTokens: Param.maxTokens, seed: Param.seed }),
    sample: { prompt: 'Summarise the plot of Hamlet in two sentences.', note: 'Short answers in under a second.' },
  },
  {
    id: 'local/text-pro', name: 'Text Pro', mode: 'text_to_text', provider: 'local', maker: 'local',
    description: 'Longer answers with a larger token budget.',
    pricing: { credits: 3, per: 'job' }, plans: PAID,
    parameterSchema: paramsSchema({ prompt: Param.prompt, systemPrompt: Param.systemPrompt, temperature: Param.temperature, maxTokens: Param.maxTokens, seed: Param.seed }),
    sample: { prompt: 'Write a product description for a solar lantern.', note: 'Up to 4096 tokens.' },
  },
  {
    id: 'local/image-fast', name: 'Image Fast', mode: 'text_to_image', provider: 'local', maker: 'local',
    description: 'PNG images in every aspect ratio.',
    pricing: { credits: 4, per: 'image' }, plans: ALL,
    parameterSchema: paramsSchema({ prompt: Param.prompt, negativePrompt: Param.negativePrompt, seed: Param.seed, aspectRatio: Param.aspectRatio, numImages: Param.numImages }),
    sample: { prompt: 'A lighthouse at dawn, watercolour', note: 'Four images per request at most.' },
  },
  {
    id: 'local/image-hd', name: 'Image HD', mode: 'text_to_image', provider: 'local', maker: 'local',
    description: 'Larger PNG images for paid plans.',
    pricing: { credits: 10, per: 'image' }, plans: PAID,
    parameterSchema: paramsSchema({ prompt: Param.prompt, negativePrompt: Param.negativePrompt, seed: Param.seed, aspectRatio: Param.aspectRatio, numImages: Param.numImages }),
    sample: { prompt: 'A city street in the rain at night, 35 mm photo', note: 'Paid plans.' },
  },
  {
    id: 'local/image-edit', name: 'Image Edit', mode: 'image_to_image', provider: 'local', maker: 'local',
    description: 'Restyles an input image; strength sets how far.',
    pricing: { credits: 5, per: 'image' }, plans: ALL,
    parameterSchema: paramsSchema({ prompt: Param.prompt, negativePrompt: Param.negativePrompt, seed: Param.seed, aspectRatio: Param.aspectRatio, numImages: Param.numImages, strength: Param.strength }),
    sample: { prompt: 'Make it look like a linocut print', note: 'Takes imageAssetIds or imageUrls.' },
  },
  {
    id: 'local/video-short', name: 'Video Short', mode: 'text_to_video', provider: 'local', maker: 'local',
    description: 'Short MP4 clips from a prompt.',
    pricing: { credits: 8, per: 'second' }, plans: PAID,
    parameterSchema: paramsSchema({ prompt: Param.prompt, negativePrompt: Param.negativePrompt, seed: Param.seed, aspectRatio: Param.aspectRatio, durationSeconds: Param.durationSeconds(10, 2) }),
    sample: { prompt: 'Waves rolling onto a pebble beach', note: 'Up to 10 seconds.' },
  },
  {
    id: 'local/animate', name: 'Animate', mode: 'image_to_video', provider: 'local', maker: 'local',
    description: 'Brings a still image to life as a short MP4.',
    pricing: { credits: 8, per: 'second' }, plans: PAID,
    parameterSchema: paramsSchema({ prompt: Param.prompt, seed: Param.seed, aspectRatio: Param.aspectRatio, durationSeconds: Param.durationSeconds(10, 2) }, []),
    sample: { prompt: 'Slow zoom in', note: 'Takes one input image.' },
  },
  {
    id: 'local/video-restyle', name: 'Video Restyle', mode: 'video_to_video', provider: 'local', maker: 'local',
    description: 'Restyles an input video.',
    pricing: { credits: 10, per: 'second' }, plans: ['team'],
    parameterSchema: paramsSchema({ prompt: Param.prompt, seed: Param.seed, strength: Param.strength, durationSeconds: Param.durationSeconds(10, 2) }),
    sample: { prompt: 'Film noir, black and white', note: 'Team plan; takes videoAssetIds or videoUrls.' },
  },
  {
    id: 'local/voice', name: 'Voice', mode: 'text_to_audio', provider: 'local', maker: 'local',
    description: 'Speech-like audio in MP3, WAV or OGG.',
    pricing: { credits: 1, per: 'second' }, plans: ALL,
    parameterSchema: paramsSchema({ prompt: Param.prompt, voice: Param.voice, speed: Param.speed, format: Param.format, durationSeconds: Param.durationSeconds(30, 3), seed: Param.seed }),
    sample: { prompt: 'Welcome to the Generation Service.', note: 'Four voices.' },
  },
  {
    id: 'openai/chat', name: 'OpenAI-compatible chat', mode: 'text_to_text', provider: 'openai', maker: 'openai-compatible',
    description: 'Chat completions from the OpenAI-compatible server the operator configured.',
    pricing: { credits: 2, per: 'job' }, plans: PAID,
    parameterSchema: paramsSchema({ prompt: Param.prompt, systemPrompt: Param.systemPrompt, temperature: Param.temperature, maxTokens: Param.maxTokens, seed: Param.seed }),
    sample: { prompt: 'Explain group commit in one paragraph.', note: 'Available when the operator configures OPENAI_BASE_URL.' },
  },
  {
    id: 'openai/image', name: 'OpenAI-compatible images', mode: 'text_to_image', provider: 'openai', maker: 'openai-compatible',
    description: 'Images from the OpenAI-compatible server the operator configured.',
    pricing: { credits: 8, per: 'image' }, plans: PAID,
    parameterSchema: paramsSchema({ prompt: Param.prompt, seed: Param.seed, aspectRatio: Param.aspectRatio, numImages: Param.numImages }),
    sample: { prompt: 'An isometric drawing of a tiny greenhouse', note: 'Available when the operator configures OPENAI_BASE_URL.' },
  },
];
