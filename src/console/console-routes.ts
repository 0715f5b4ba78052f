/**
 * The console's HTTP routes: the pages and their assets, built from
 * console/ by Vite into dist/console (`npm run build:console`).
 *
 * What must stay true: every script, style sheet, font and worker comes from
 * this server, and the Content-Security-Policy names no other host, so a page
 * cannot load anything from elsewhere even by mistake.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Where `npm run build:console` writes the assets: dist/console under the package root (from src/ or dist/src/ alike). */
export function defaultConsoleDirectory(from: string = __dirname): string {
  let directory = from;
  while (!fs.existsSync(path.join(directory, 'package.json'))) {
    const parent = path.dirname(directory);
    if (parent === directory) break;
    directory = parent;
  }
  return path.join(directory, 'dist', 'console');
}

/**
 * 'self' covers the same-origin WebSocket (graphql-ws) too. Inline styles are
 * allowed because the editor sets element styles; scripts are never inline.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.ttf': 'font/ttf',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

/** Which page a path shows, or null when the path is not the console's. */
export function pageFor(pathname: string): 'index.html' | 'playground.html' | null {
  const normalised = pathname.length > 1 ? pathname.replace(/\/+$/, '') : pathname;
  if (normalised === '/playground') return 'playground.html';
  if (normalised === '/' || normalised === '/runs' || normalised === '/signin') return 'index.html';
  if (/^\/runs\/[A-Za-z0-9_-]{1,100}$/.test(normalised)) return 'index.html';
  if (normalised === '/tasks' || /^\/tasks\/[A-Za-z0-9_-]{1,100}$/.test(normalised)) return 'index.html';
  if (normalised === '/chat' || /^\/chat\/[A-Za-z0-9_-]{1,100}$/.test(normalised)) return 'index.html';
  if (normalised === '/usage') return 'index.html';
  return null;
}

interface Asset {
  body: Buffer;
  gzipped: Buffer | null;
  contentType: string;
}

export interface ConsoleRoutes {
  /** Answers the request and returns true when the path belongs to the console. */
  handle(request: IncomingMessage, response: ServerResponse, pathname: string): boolean;
}

/**
 * Assets are read once, at first use, with their pre-compressed `.gz`
 * siblings; a missing build answers 503 with the command that makes it.
 */
export function createConsoleRoutes(directory: string = defaultConsoleDirectory()): ConsoleRoutes {
  const cache = new Map<string, Asset | null>();

  const load = (relative: string): Asset | null => {
    if (cache.has(relative)) return cache.get(relative)!;
    const file = path.join(directory, relative);
    let asset: Asset | null = null;
    try {
      const body = fs.readFileSync(file);
      let gzipped: Buffer | null = null;
      try {
        gzipped = fs.readFileSync(`${file}.gz`);
      } catch {
        gzipped = null;
      }
      asset = { body, gzipped, contentType: CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream' };
    } catch {
      asset = null;
    }
    cache.set(relative, asset);
    return asset;
  };

  const send = (request: IncomingMessage, response: ServerResponse, asset: Asset, cacheControl: string) => {
    response.statusCode = 200;
    response.setHeader('content-type', asset.contentType);
    response.setHeader('cache-control', cacheControl);
    response.setHeader('vary', 'accept-encoding');
    const acceptsGzip = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
    const body = acceptsGzip && asset.gzipped ? asset.gzipped : asset.body;
    if (body === asset.gzipped) response.setHeader('content-encoding', 'gzip');
    response.setHeader('content-length', body.length);
    response.end(request.method === 'HEAD' ? undefined : body);
  };

  return {
    handle(request, response, pathname) {
      const isAsset = pathname.startsWith('/assets/');
      const page = isAsset ? null : pageFor(pathname);
      if (!isAsset && page === null) return false;
      setSecurityHeaders(response);
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        response.statusCode = 405;
        response.setHeader('allow', 'GET, HEAD');
        response.end();
        return true;
      }
      if (isAsset) {
        const name = pathname.slice('/assets/'.length);
        // Only plain file names built by Vite: no directories, no dot files.
        const asset = /^[\w.-]+$/.test(name) && !name.startsWith('.') ? load(`assets/${name}`) : null;
        if (!asset) {
          response.statusCode = 404;
          response.setHeader('content-type', 'text/plain; charset=utf-8');
          response.end('Not found');
          return true;
        }
        // File names carry a content hash: a changed file has a new name.
        send(request, response, asset, 'public, max-age=31536000, immutable');
        return true;
      }
      const html = load(page!);
      if (!html) {
        response.statusCode = 503;
        response.setHeader('content-type', 'text/plain; charset=utf-8');
        response.end('The console is not built. Run `npm run build:console` (npm start does it), or set UI=false to turn the console off.\n');
        return true;
      }
      send(request, response, html, 'no-cache');
      return true;
    },
  };
}

function setSecurityHeaders(response: ServerResponse): void {
  response.setHeader('content-security-policy', CONTENT_SECURITY_POLICY);
  response.setHeader('x-content-type-options', 'nosniff');
  response.setHeader('referrer-policy', 'no-referrer');
  response.setHeader('cross-origin-opener-policy', 'same-origin');
}
