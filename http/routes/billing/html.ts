import { Readable } from 'node:stream';
import type { Reply } from '../../route.ts';

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** A small self-contained HTML page (the local provider's checkout and portal), never cached, no scripts. */
export function htmlPage(title: string, body: string, status = 200): Reply {
  const text =
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    '<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}button{font-size:1rem;padding:.5rem 1rem;margin-right:.5rem}td,th{padding:.25rem .75rem;text-align:left}</style>' +
    `</head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
  const buffer = Buffer.from(text, 'utf8');
  return {
    status,
    stream: { body: Readable.from([buffer]), length: buffer.length },
    headers: {
      'Content-Type': 'text/html; charset=utf-8',
      'Cache-Control': 'no-store',
      'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
      'X-Frame-Options': 'DENY',
    },
  };
}

export function dollars(cents: number): string {
  return `$${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`;
}
