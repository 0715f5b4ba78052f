/**
 * Headless Chromium for the console's tests, screenshots and measurements:
 * the system's Chromium (Debian's `chromium` package at /usr/bin/chromium, or
 * CHROMIUM_PATH) driven by playwright-core. A browser is never downloaded.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Flags for a machine without network access: nothing phones home, nothing updates. */
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function chromiumAvailable(): boolean {
  return fs.existsSync(CHROMIUM_PATH);
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A fresh profile (--user-data-dir) each time: nothing cached, nothing remembered between runs. */
export async function launchBrowser(viewport = { width: 1280, height: 900 }): Promise<Browser> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport,
  });
  return {
    context,
    close: async () => {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}
