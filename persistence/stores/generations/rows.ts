/** The rows of the generation stores, as the layers above read them. */
export type { GenerationRow } from '../../entities/generation.ts';
