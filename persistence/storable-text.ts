/**
 * U+0000, and a surrogate that is not half of a pair: text PostgreSQL cannot store (text and jsonb refuse
 * the NUL character; an unpaired surrogate is not Unicode and cannot be encoded as UTF-8). With the `u`
 * flag a well-formed pair is one code point, so only unpaired halves match `\p{Cs}`.
 */
const UNSTORABLE = /[\0\p{Cs}]/u;
const UNSTORABLE_ALL = /[\0\p{Cs}]/gu;

/** Whether a string holds a character the database cannot store (see UNSTORABLE). */
export function isUnstorable(text: string): boolean {
  return UNSTORABLE.test(text);
}

/**
 * Text from outside the service that is stored as it comes (a provider's output or error message): each
 * character the database cannot store becomes U+FFFD, as a decoder does with bytes it cannot read, so the
 * write that records it cannot fail because of it.
 */
export function storableText(text: string): string {
  return UNSTORABLE.test(text) ? text.replace(UNSTORABLE_ALL, '\uFFFD') : text;
}
