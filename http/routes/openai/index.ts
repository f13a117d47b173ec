import type { RouteDef } from '../../route.ts';
import { createChatCompletion } from './chat.ts';
import { createImageEdit, createImages } from './images.ts';
import { getOpenAiModel, listOpenAiModels } from './models.ts';
import { createSpeech } from './speech.ts';

/** The OpenAI-compatible door, under /openai/v1 (docs/openai-compatible.md). */
export const openAiRoutes: RouteDef[] = [createChatCompletion, createImages, createImageEdit, createSpeech, listOpenAiModels, getOpenAiModel];
