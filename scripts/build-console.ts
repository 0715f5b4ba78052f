/**
 * Builds the console (console/ → dist/console) with Vite, then writes a
 * gzip sibling of every asset for the server to send. `npm start` runs it
 * before the server: the build is skipped when its inputs (the console's
 * sources, the client library, the lock file) have not changed since the
 * last one, and when UI=false.
 *
 *     node dist/scripts/build-console.js [--force]
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { loadConfig } from '../src/config';

/** The package root, from scripts/ (tests) or dist/scripts/ (npm start) alike. */
function packageRoot(from: string): string {
  let directory = from;
  while (!fs.existsSync(path.join(directory, 'package.json')) && path.dirname(directory) !== directory) directory = path.dirname(directory);
  return directory;
}

const root = packageRoot(__dirname);
const outputDirectory = path.join(root, 'dist', 'console');
const stampFile = path.join(outputDirectory, '.inputs-sha256');
const INPUTS = ['console', 'src/client', 'package-lock.json'];
const COMPRESSIBLE = /\.(js|css|html|ttf|svg|json|map)$/;

function listFiles(entry: string): string[] {
  const full = path.join(root, entry);
  if (!fs.existsSync(full)) return [];
  if (fs.statSync(full).isFile()) return [entry];
  return fs
    .readdirSync(full, { withFileTypes: true })
    .filter((child) => child.name !== 'node_modules' && !child.name.startsWith('.'))
    .flatMap((child) => listFiles(path.join(entry, child.name)));
}

/** One hash over the names and contents of every input file. */
export function inputsHash(): string {
  const hash = crypto.createHash('sha256');
  for (const file of INPUTS.flatMap(listFiles).sort()) {
    hash.update(file).update('\0').update(fs.readFileSync(path.join(root, file))).update('\0');
  }
  return hash.digest('hex');
}

export function gzipAssets(directory: string): void {
  for (const entry of fs.readdirSync(directory, { withFileTypes: true })) {
    const file = path.join(directory, entry.name);
    if (entry.isDirectory()) gzipAssets(file);
    else if (COMPRESSIBLE.test(entry.name)) fs.writeFileSync(`${file}.gz`, zlib.gzipSync(fs.readFileSync(file), { level: 9 }));
  }
}

export function buildConsole(force: boolean): 'built' | 'current' {
  const hash = inputsHash();
  if (!force && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === hash && fs.existsSync(path.join(outputDirectory, 'index.html'))) return 'current';
  execFileSync(process.execPath, [path.join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--config', path.join(root, 'console', 'vite.config.mts')], {
    cwd: root,
    stdio: 'inherit',
    // Vite takes NODE_ENV from the environment when set (jest sets "test"): React must be its production build.
    env: { ...process.env, NODE_ENV: 'production' },
  });
  gzipAssets(outputDirectory);
  fs.writeFileSync(stampFile, hash);
  return 'built';
}

if (require.main === module) {
  let ui = true;
  try {
    ui = loadConfig().ui;
  } catch {
    // The server will list the configuration problems; the console is built either way.
  }
  if (!ui) {
    console.log('UI=false: the console is not built');
  } else {
    const started = Date.now();
    const outcome = buildConsole(process.argv.includes('--force'));
    console.log(outcome === 'built' ? `built the console into dist/console in ${((Date.now() - started) / 1000).toFixed(1)} s` : 'the console is current (dist/console)');
  }
}
