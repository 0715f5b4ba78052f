/**
 * Headless Chromium for the console's tests, screenshots and measurements:
 * the system's Chromium (Debian's `chromium` package) driven by
 * playwright-core. A browser is never downloaded; without one the browser
 * tests are skipped with a message saying how to enable them.
 */
import type { Page } from 'playwright-core';
import { buildConsole } from '../../scripts/build-console';
import { CHROMIUM_PATH, type Browser } from '../../scripts/chromium';

/**
 * The few browser globals the page scripts below touch. The project compiles
 * without the DOM library (its types clash with Node's), so scripts that run
 * in the page cast globalThis to this.
 */
export interface PageElement {
  dataset: Record<string, string | undefined>;
  textContent: string | null;
  matches(selector: string): boolean;
  querySelectorAll(selector: string): ArrayLike<PageElement>;
}
export interface PageSocket {
  close(code?: number, reason?: string): void;
}
export interface PageWindow {
  localStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };
  document: PageElement & { querySelector(selector: string): PageElement | null };
  WebSocket: new (url: string, protocols?: string | string[]) => PageSocket;
  HTMLElement: abstract new () => PageElement;
  MutationObserver: new (callback: (mutations: { addedNodes: ArrayLike<unknown> }[]) => void) => { observe(target: unknown, options: Record<string, boolean>): void };
  __cardsAdded: number[];
  __sockets: PageSocket[];
}

export { CHROMIUM_PATH, CHROMIUM_FLAGS, chromiumAvailable, launchBrowser, type Browser } from '../../scripts/chromium';

export const SKIP_MESSAGE = `Browser tests skipped: no Chromium at ${CHROMIUM_PATH}. Install Debian's package (apt-get install -y chromium) or set CHROMIUM_PATH to a Chromium binary to run them.`;

/** Builds dist/console when its sources changed since the last build (a no-op otherwise). */
export function ensureConsoleBuilt(): void {
  buildConsole(false);
}

export interface WatchedPage {
  page: Page;
  /** Requests to any origin other than the server's. */
  foreignRequests: string[];
  /** Console errors and uncaught page errors. */
  errors: string[];
}

/** A page that has the console's token already and records what a page must never do. */
export async function openPage(browser: Browser, base: string, token: string | null): Promise<WatchedPage> {
  const page = await browser.context.newPage();
  const origin = new URL(base).origin;
  const foreignRequests: string[] = [];
  const errors: string[] = [];
  page.on('request', (request) => {
    const url = request.url();
    if (url.startsWith('data:') || url.startsWith('blob:')) return;
    if (new URL(url).origin !== origin) foreignRequests.push(url);
  });
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  if (token !== null) await page.addInitScript((value) => (globalThis as unknown as PageWindow).localStorage.setItem('promptwire.token', value), token);
  return { page, foreignRequests, errors };
}

/** The run page's cards as the DOM holds them: sequence and kind, in document order. */
export async function cardsOf(page: Page): Promise<string[]> {
  return page.$$eval('[data-step-sequence]', (elements) =>
    elements.map((element) => {
      const card = element as unknown as PageElement;
      return `${card.dataset.stepSequence}:${card.dataset.stepKind}`;
    }),
  );
}

/**
 * Installed before the page's scripts: records the order in which step cards
 * are added to the DOM (a card added twice shows up twice), and keeps every
 * WebSocket the page opens so a test can drop them.
 */
export function recordCardsAndSockets(): void {
  const win = globalThis as unknown as PageWindow;
  win.__cardsAdded = [];
  win.__sockets = [];
  const Native = win.WebSocket;
  win.WebSocket = class extends Native {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      win.__sockets.push(this);
    }
  };
  new win.MutationObserver((mutations) => {
    for (const mutation of mutations) {
      for (const node of Array.from(mutation.addedNodes)) {
        if (!(node instanceof win.HTMLElement)) continue;
        const element = node as PageElement;
        const cards = element.matches('[data-step-sequence]') ? [element] : Array.from(element.querySelectorAll('[data-step-sequence]'));
        for (const card of cards) win.__cardsAdded.push(Number(card.dataset.stepSequence));
      }
    }
  }).observe(win.document, { childList: true, subtree: true });
}
