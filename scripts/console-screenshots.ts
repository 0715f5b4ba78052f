/**
 * Regenerates the screenshots of the console in docs/console.md (docs/screenshots/*.png):
 * a fresh embedded database with the example set, a demo run, and each page
 * in headless Chromium.
 *
 *     npm run build && node dist/scripts/console-screenshots.js
 */
import 'reflect-metadata';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/config';
import { createServer } from '../src/server';
import { buildConsole } from './build-console';
import { chromiumAvailable, CHROMIUM_PATH, launchBrowser } from './chromium';

const TOKEN = 'screenshot-admin-token-0123456789';

async function main(): Promise<void> {
  if (!chromiumAvailable()) throw new Error(`No Chromium at ${CHROMIUM_PATH} (apt-get install -y chromium, or set CHROMIUM_PATH)`);
  const root = path.resolve(__dirname, '..', '..');
  const output = path.join(root, 'docs', 'screenshots');
  fs.mkdirSync(output, { recursive: true });
  buildConsole(false);

  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-screenshots-'));
  const server = await createServer(loadConfig({ DATABASE_URL: `sqlite:${path.join(directory, 'app.sqlite')}`, PORT: '0', ADMIN_TOKEN: TOKEN, LOG_LEVEL: 'silent' }), {
    logger: pino({ level: 'silent' }),
  });
  const base = server.url.replace(/\/graphql$/, '');
  const gql = async <T>(query: string, variables: Record<string, unknown> = {}): Promise<T> => {
    const response = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ query, variables }) });
    const body = (await response.json()) as { data: T; errors?: unknown[] };
    if (body.errors) throw new Error(JSON.stringify(body.errors));
    return body.data;
  };
  const browser = await launchBrowser({ width: 1280, height: 860 });
  try {
    await gql('mutation { startRun(input: {configuration: "demo-assistant", prompt: "Which persona do you use?", dryRun: true}) { id } }');
    const { startRun } = await gql<{ startRun: { id: string } }>('mutation { startRun(input: {configuration: "demo-assistant", prompt: "What is 17 * 23?", tools: ["calculator"]}) { id } }');

    const page = await browser.context.newPage();
    await page.goto(`${base}/`);
    await page.waitForSelector('[data-field="token"]');
    await page.screenshot({ path: path.join(output, 'sign-in.png') });
    await page.fill('[data-field="token"]', TOKEN);
    await page.click('[data-action="sign-in"]');
    await page.waitForSelector('text=Signed in as');
    await page.screenshot({ path: path.join(output, 'landing.png') });

    await page.goto(`${base}/runs/new`);
    await page.waitForSelector('[data-effective-prompt]');
    await page.fill('[data-field="prompt"]', 'What is 17 * 23?');
    await page.screenshot({ path: path.join(output, 'run-playground.png') });

    await page.goto(`${base}/runs/${startRun.id}`);
    await page.waitForSelector('[data-run-status]:text("COMPLETED")');
    await page.click('[data-step-kind="LLM"] details.thinking summary');
    await page.screenshot({ path: path.join(output, 'run-trace.png'), fullPage: true });

    const waiting = await gql<{ startRun: { id: string } }>(
      'mutation { startRun(input: {configuration: "demo-assistant", prompt: "What is 17 * 23?", tools: ["calculator"], approvalRequired: ["calculator"], approvalTimeoutSeconds: 900}) { id } }',
    );
    await page.goto(`${base}/runs/${waiting.startRun.id}`);
    await page.waitForSelector('[data-approval-deadline]');
    await page.click('[data-step-kind="REQUEST"] details.messages-sent summary');
    await page.waitForSelector('[data-step-kind="REQUEST"] ol.messages');
    await page.screenshot({ path: path.join(output, 'run-approval.png'), fullPage: true });
    await gql('mutation($id: ID!) { cancelRun(id: $id) { status } }', { id: waiting.startRun.id });

    await page.goto(`${base}/runs`);
    await page.waitForSelector(`[data-run-id="${startRun.id}"]`);
    await page.screenshot({ path: path.join(output, 'runs.png') });

    await page.goto(`${base}/playground`);
    await page.waitForSelector('.graphiql-query-editor .view-lines');
    await page.click('.graphiql-execute-button');
    await page.waitForSelector('.graphiql-response :text("nova_persona")');
    await page.click('button[aria-label="Show Examples"]').catch(() => undefined);
    await page.screenshot({ path: path.join(output, 'playground.png') });
    console.log(`wrote ${fs.readdirSync(output).filter((name) => name.endsWith('.png')).length} screenshots to docs/screenshots`);
  } finally {
    await browser.close();
    await server.stop();
    fs.rmSync(directory, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
