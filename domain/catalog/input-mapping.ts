import type { InputMappingSpec } from './file-schema.ts';

/**
 * A deployment's upstream input from our validated params: each param under its own name unless renamed or
 * omitted, aspectRatio turned into width and height when the deployment asks, then its fixed values (which
 * win). Input files are the adapter's to attach (under `images`/`videos` names the mapping gives).
 */
export function upstreamInput(mapping: InputMappingSpec | undefined, params: Record<string, unknown>): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  const omit = new Set(mapping?.omit ?? []);
  const ratio = mapping?.aspectRatio;
  for (const [name, value] of Object.entries(params)) {
    if (omit.has(name) || value === undefined) continue;
    if (name === 'aspectRatio' && ratio) {
      const size = sizeOf(String(value), ratio.longSide, ratio.multipleOf ?? 8);
      input[ratio.width] = size.width;
      input[ratio.height] = size.height;
      continue;
    }
    input[mapping?.rename?.[name] ?? name] = value;
  }
  return { ...input, ...(mapping?.fixed ?? {}) };
}

/** The upstream input names a mapping can produce (for the catalog's check against `upstreamInputs`). */
export function mappedInputNames(mapping: InputMappingSpec | undefined, offered: string[]): string[] {
  const omit = new Set(mapping?.omit ?? []);
  const names = new Set<string>();
  for (const name of offered) {
    if (omit.has(name)) continue;
    if (name === 'aspectRatio' && mapping?.aspectRatio) {
      names.add(mapping.aspectRatio.width);
      names.add(mapping.aspectRatio.height);
    } else {
      names.add(mapping?.rename?.[name] ?? name);
    }
  }
  for (const name of Object.keys(mapping?.fixed ?? {})) names.add(name);
  if (mapping?.images) names.add(mapping.images);
  if (mapping?.videos) names.add(mapping.videos);
  return [...names];
}

/** Width and height for a ratio such as "16:9", the longer side `longSide`, each a multiple of `multipleOf`. */
export function sizeOf(ratio: string, longSide: number, multipleOf: number): { width: number; height: number } {
  const [w, h] = ratio.split(':').map(Number);
  const wide = w! >= h!;
  const short = Math.max(multipleOf, Math.round((longSide * (wide ? h! / w! : w! / h!)) / multipleOf) * multipleOf);
  return wide ? { width: longSide, height: short } : { width: short, height: longSide };
}
