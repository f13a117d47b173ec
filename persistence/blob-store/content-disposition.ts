/** `attachment`, with the file name in both the plain and the RFC 5987 form. */
export function contentDisposition(filename: string | undefined): string {
  if (!filename) return 'attachment';
  const plain = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${plain}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}
