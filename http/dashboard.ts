import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpResponse } from 'uWebSockets.js';
import { statusLine, type ResponseState } from './respond.ts';
import { endWithoutBody } from './uws.ts';

/**
 * The web dashboard's static files (dashboard/dist, built at install by `npm run build:dashboard`), served at
 * `/` for GET requests no API route takes. The files are read into memory once: a request is answered from a
 * map of exact paths, so no request path ever reaches the file system (no traversal), and what is read is
 * bounded (MAX_FILE_BYTES each, MAX_TOTAL_BYTES in all). A page path without a file extension is the
 * single-page app's own route and answers index.html; /v1/… and /health/… never do (their 404 is the API's).
 */
export const DASHBOARD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../dashboard/dist');
const MAX_FILE_BYTES = 4 * 1024 * 1024;
const MAX_TOTAL_BYTES = 32 * 1024 * 1024;
const MAX_FILES = 500;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * What the pages may load: their own scripts and styles only (no inline script, no CDN), outputs from the
 * storage's download URLs (the service's own, or a bucket's), uploads PUT to presigned URLs; no framing.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob: http: https:",
  "media-src 'self' blob: http: https:",
  "connect-src 'self' http: https:",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

interface StaticFile {
  body: Buffer;
  contentType: string;
  etag: string;
  cacheControl: string;
}

export interface Dashboard {
  files: Map<string, StaticFile>;
  index: StaticFile | undefined;
}

/** Reads the built dashboard; an unbuilt one (no index.html) is empty, and `/` answers 404 saying how to build it. */
export function loadDashboard(dir = DASHBOARD_DIR): Dashboard {
  const files = new Map<string, StaticFile>();
  let total = 0;
  const walk = (relative: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(path.join(dir, relative), { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const name = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) {
        walk(name);
        continue;
      }
      const contentType = CONTENT_TYPES[path.extname(entry.name).toLowerCase()];
      if (!entry.isFile() || !contentType || files.size >= MAX_FILES) continue;
      const size = fs.statSync(path.join(dir, name)).size;
      if (size > MAX_FILE_BYTES || total + size > MAX_TOTAL_BYTES) continue;
      const body = fs.readFileSync(path.join(dir, name));
      total += body.length;
      // Content-hashed names (_app/…) never change; index.html is checked on every load.
      const immutable = name.startsWith('_app/');
      files.set(`/${name}`, {
        body,
        contentType,
        etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
        cacheControl: immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      });
    }
  };
  walk('');
  return { files, index: files.get('/index.html') };
}

/** Whether a GET for this path is the dashboard's to answer once no route took it. */
export function isDashboardPath(urlPath: string): boolean {
  return !RESERVED.some((prefix) => urlPath === prefix || urlPath.startsWith(`${prefix}/`));
}

/** Paths of the service's own, never a page: the API, health, and /metrics (served on its own listener, so a scraper pointed at this port gets 404, not a page). */
const RESERVED = ['/v1', '/health', '/metrics'];

/**
 * Answers a GET from the dashboard: a file by its exact path, or index.html for an app route (a path whose
 * last segment has no dot). Returns false when it has nothing for the path; the caller answers 404 as the API does.
 */
export function serveDashboard(
  dashboard: Dashboard,
  res: HttpResponse,
  state: ResponseState,
  requestId: string,
  urlPath: string,
  headers: Record<string, string>,
): boolean {
  const lastSegment = urlPath.slice(urlPath.lastIndexOf('/') + 1);
  const file = dashboard.files.get(urlPath) ?? (lastSegment.includes('.') ? undefined : dashboard.index);
  if (!file) return false;
  return sendFile(res, state, requestId, file, headers);
}

function sendFile(res: HttpResponse, state: ResponseState, requestId: string, file: StaticFile, headers: Record<string, string>): boolean {
  if (state.aborted || state.finished) return true;
  state.finished = true;
  const notModified = headers['if-none-match']?.split(',').some((tag) => tag.trim() === file.etag);
  res.cork(() => {
    res.writeStatus(statusLine(notModified ? 304 : 200));
    res.writeHeader('X-Request-Id', requestId);
    res.writeHeader('Content-Type', file.contentType);
    res.writeHeader('Cache-Control', file.cacheControl);
    res.writeHeader('ETag', file.etag);
    res.writeHeader('X-Content-Type-Options', 'nosniff');
    if (file.contentType.startsWith('text/html')) {
      res.writeHeader('Content-Security-Policy', DASHBOARD_CSP);
      res.writeHeader('X-Frame-Options', 'DENY');
      res.writeHeader('Referrer-Policy', 'same-origin');
    }
    if (notModified) endWithoutBody(res);
    else res.end(file.body);
  });
  return true;
}
