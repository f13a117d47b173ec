/** A model's price as GET /v1/models gives it (`pricing`). */
export type Pricing = { per: 'job' | 'image' | 'second'; credits: number } | { per: 'tokens'; inputPer1k: number; outputPer1k: number };

const UNITS: Record<'job' | 'image' | 'second', string> = { job: 'a job', image: 'an image', second: 'a started second' };

/** The price as its unit says it: whole credits per job, image or started second, or credits per 1,000 tokens each way. */
export function priceText(pricing: Pricing): string {
  if (pricing.per === 'tokens') return `${pricing.inputPer1k} per 1,000 input tokens · ${pricing.outputPer1k} per 1,000 output tokens`;
  return `${pricing.credits} ${pricing.credits === 1 ? 'credit' : 'credits'} ${UNITS[pricing.per]}`;
}
