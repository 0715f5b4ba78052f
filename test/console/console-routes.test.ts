/**
 * The console's pages and assets as the server sends them: the right page
 * per path, a Content-Security-Policy naming no other host, only built
 * files, pre-compressed when the client takes gzip, and nothing at all with
 * UI=false.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { CONTENT_SECURITY_POLICY, pageFor } from '../../src/console/console-routes';
import { startTestServer, type TestServer } from '../support/server';

const SCRIPT = 'console.log("app");'.repeat(20);

/** A stand-in build: the routes serve whatever the build wrote, so the test writes a tiny one. */
function fakeBuild(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-console-'));
  fs.mkdirSync(path.join(directory, 'assets'));
  fs.writeFileSync(path.join(directory, 'index.html'), '<!doctype html><title>runs</title><script type="module" src="/assets/app-1.js"></script>');
  fs.writeFileSync(path.join(directory, 'playground.html'), '<!doctype html><title>playground</title>');
  fs.writeFileSync(path.join(directory, 'assets', 'app-1.js'), SCRIPT);
  fs.writeFileSync(path.join(directory, 'assets', 'app-1.js.gz'), zlib.gzipSync(SCRIPT));
  fs.writeFileSync(path.join(directory, 'secret.txt'), 'not an asset');
  return directory;
}

/** What the server sent, undecoded (fetch would decompress transparently). */
function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; encoding: string | undefined; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, encoding: response.headers['content-encoding'], body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

describe('pageFor', () => {
  it.each([
    ['/', 'index.html'],
    ['/runs', 'index.html'],
    ['/runs/', 'index.html'],
    ['/runs/new', 'index.html'],
    ['/runs/0b5f4a52-1c2d-4e3f-8a9b-0c1d2e3f4a5b', 'index.html'],
    ['/usage', 'index.html'],
    ['/usage/', 'index.html'],
    ['/playground', 'playground.html'],
    ['/tasks', 'index.html'],
    ['/tasks/alt_text', 'index.html'],
    ['/tasks/a/b', null],
    ['/graphql', null],
    ['/usage/x', null],
    ['/runs/a/b', null],
    ['/healthz', null],
  ])('%s shows %s', (pathname, page) => {
    expect(pageFor(pathname)).toBe(page);
  });
});

describe('the console over HTTP', () => {
  let t: TestServer;
  let directory: string;
  let base: string;

  beforeAll(async () => {
    directory = fakeBuild();
    t = await startTestServer('sqlite', { env: { CONSOLE_DIRECTORY: directory } });
    base = t.url.replace(/\/graphql$/, '');
  });
  afterAll(async () => {
    await t?.stop();
    fs.rmSync(directory, { recursive: true, force: true });
  });

  it('serves the run pages and the playground with a policy that names no other host', async () => {
    for (const [pathname, title] of [
      ['/', 'runs'],
      ['/runs', 'runs'],
      ['/runs/new', 'runs'],
      ['/runs/0b5f4a52-1c2d-4e3f-8a9b-0c1d2e3f4a5b', 'runs'],
      ['/usage', 'runs'],
      ['/playground', 'playground'],
    ] as const) {
      const response = await fetch(base + pathname);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(await response.text()).toContain(`<title>${title}</title>`);
      const policy = response.headers.get('content-security-policy') ?? '';
      expect(policy).toBe(CONTENT_SECURITY_POLICY);
      expect(policy).toContain("script-src 'self'");
      expect(policy).toContain("connect-src 'self'");
      expect(policy).not.toMatch(/https?:|wss?:|\*/);
    }
  });

  it('sends built assets, gzipped when asked, and nothing else from the build directory', async () => {
    const plain = await rawGet(`${base}/assets/app-1.js`, {});
    expect(plain.status).toBe(200);
    expect(plain.encoding).toBeUndefined();
    expect(plain.body.toString()).toBe(SCRIPT);
    const asset = await fetch(`${base}/assets/app-1.js`);
    expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(asset.headers.get('cache-control')).toContain('immutable');

    const gzipped = await rawGet(`${base}/assets/app-1.js`, { 'accept-encoding': 'gzip, deflate' });
    expect(gzipped.encoding).toBe('gzip');
    expect(zlib.gunzipSync(gzipped.body).toString()).toBe(SCRIPT);

    for (const pathname of ['/assets/missing.js', '/assets/..%2fsecret.txt', '/assets/.hidden', '/secret.txt', '/index.html', '/assets/']) {
      const response = await rawGet(base + pathname, {});
      expect(response.status).toBe(404);
      expect(response.body.toString()).not.toContain('not an asset');
    }
  });

  it('answers only GET and HEAD on its paths', async () => {
    const response = await fetch(`${base}/runs`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD');
    const head = await fetch(`${base}/playground`, { method: 'HEAD' });
    expect(head.status).toBe(200);
  });

  it('leaves GraphQL and the probes alone', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await t.ok<{ viewer: { role: string } }>('{ viewer { role } }')).viewer.role).toBe('ADMIN');
  });
});

describe('the console when it is off or not built', () => {
  it('UI=false: the console paths are not found, GraphQL still answers', async () => {
    const directory = fakeBuild();
    const t = await startTestServer('sqlite', { env: { UI: 'false', CONSOLE_DIRECTORY: directory } });
    try {
      const base = t.url.replace(/\/graphql$/, '');
      for (const pathname of ['/', '/playground', '/runs', '/runs/new', '/assets/app-1.js']) expect((await fetch(base + pathname)).status).toBe(404);
      expect((await t.ok<{ viewer: { role: string } }>('{ viewer { role } }')).viewer.role).toBe('ADMIN');
    } finally {
      await t.stop();
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });

  it('without a build the pages say how to build it', async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-console-empty-'));
    const t = await startTestServer('sqlite', { env: { CONSOLE_DIRECTORY: directory } });
    try {
      const response = await fetch(t.url.replace(/\/graphql$/, '/runs'));
      expect(response.status).toBe(503);
      expect(await response.text()).toContain('npm run build:console');
    } finally {
      await t.stop();
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});
