/**
 * Conditional GET (RFC 9110, 13.1.2): whether an `If-None-Match` header matches the entity tag of the answer,
 * in which case a GET is answered `304 Not Modified` without a body. The comparison is weak: `W/"x"` matches
 * `"x"`; `*` matches any current answer.
 */
export function ifNoneMatchMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  const wanted = opaque(etag);
  return header.split(',').some((tag) => tag.trim() === '*' || opaque(tag) === wanted);
}
