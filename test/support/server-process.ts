/**
 * The real server (`src/main.ts`) in a child process: what "a second
 * instance" is in production. Used where two processes must race on one
 * database, or where a test must watch a server whose event loop is not its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { TestDatabase } from './databases';
import { ADMIN_TOKEN, type GraphQLResponse } from './server';

export interface ServerProcess {
  url: string;
  /** The server's origin (`http://127.0.0.1:PORT`), for /healthz and the like. */
  origin: string;
  gql<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, token?: string | null): Promise<GraphQLResponse<T>>;
  /** The data of a query that must succeed; throws with the errors otherwise. */
  ok<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, token?: string | null): Promise<T>;
  stop(): Promise<void>;
  /** Ends the process at once (SIGKILL): no shutdown, as a crash. */
  kill(): Promise<void>;
  /** Freezes the process (SIGSTOP), as a long GC pause or a descheduled VM would; `resume()` lets it go on. */
  pause(): void;
  resume(): void;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
}

const root = path.resolve(__dirname, '../..');

export function databaseUrlOf(database: TestDatabase): string {
  return database.config.kind === 'sqlite' ? `sqlite:${database.config.file}` : database.config.url;
}

export async function startServerProcess(database: TestDatabase, env: Record<string, string> = {}): Promise<ServerProcess> {
  const child: ChildProcess = spawn(process.execPath, ['-r', path.join(root, 'test/support/register-ts.js'), path.join(root, 'src/main.ts')], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrlOf(database),
      ADMIN_TOKEN,
      SECRET_KEY: 'test-secret-key-for-provider-keys',
      SEED_EXAMPLES: 'false',
      LOG_LEVEL: 'silent',
      NODE_ENV: 'production',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server process did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /promptwire ready: (\S+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the server process exited with ${code}:\n${output}`));
    });
  });
  const gql = async <T>(query: string, variables?: Record<string, unknown>, token: string | null = ADMIN_TOKEN): Promise<GraphQLResponse<T>> => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as GraphQLResponse<T>;
  };
  return {
    url,
    origin: new URL(url).origin,
    gql,
    async ok<T>(query: string, variables?: Record<string, unknown>, token?: string | null) {
      const result = await gql<T>(query, variables, token);
      if (result.errors?.length || !result.data) throw new Error(`GraphQL errors: ${JSON.stringify(result.errors)}`);
      return result.data;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
    pause() {
      child.kill('SIGSTOP');
    },
    resume() {
      child.kill('SIGCONT');
    },
    output: () => output,
  };
}
