/**
 * The Node flags the server runs with live in one place, package.json's
 * `config.nodeFlags`: `npm start` passes them, the Docker image sets them as
 * NODE_OPTIONS, and the fan-out benchmark starts its servers with them.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { config: { nodeFlags: string }; scripts: { start: string } };

describe('the server\'s Node flags', () => {
  it('npm start runs the server with package.json\'s config.nodeFlags', () => {
    expect(manifest.config.nodeFlags).toMatch(/\S/);
    expect(manifest.scripts.start).toMatch(/node \$npm_package_config_nodeFlags dist\/src\/main\.js$/);
  });

  it('the Docker image sets the same flags as NODE_OPTIONS', () => {
    const dockerfile = fs.readFileSync(path.join(root, 'docker/Dockerfile'), 'utf8');
    const [, options] = /NODE_OPTIONS=("[^"]*"|\S+)/.exec(dockerfile) ?? [];
    expect(options?.replace(/^"|"$/g, '')).toBe(manifest.config.nodeFlags);
  });

  it('Node accepts them on the command line and in NODE_OPTIONS', () => {
    const flags = manifest.config.nodeFlags.split(' ');
    expect(execFileSync(process.execPath, [...flags, '-e', 'process.stdout.write("ok")'], { encoding: 'utf8' })).toBe('ok');
    expect(execFileSync(process.execPath, ['-e', 'process.stdout.write("ok")'], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: manifest.config.nodeFlags } })).toBe('ok');
  });
});
