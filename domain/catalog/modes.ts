/** The seven generation modes a model makes one of. */
export const MODES = ['text_to_text', 'text_to_image', 'text_to_video', 'text_to_audio', 'image_to_image', 'image_to_video', 'video_to_video'] as const;
export type Mode = (typeof MODES)[number];
