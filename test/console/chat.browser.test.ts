/**
 * The chat pages in a real browser (headless Chromium), through the running
 * server and the scripted provider: a chat opened on a configuration, two
 * messages sent and both replies seen (the second while it streams), a
 * second send during a turn refused with the server's message, a reload
 * mid-history showing the same messages, and the dropped-turns notice.
 *
 * Skipped, with a message, when there is no Chromium.
 */
import type { Page } from 'playwright-core';
import { chromiumAvailable, ensureConsoleBuilt, launchBrowser, openPage, SKIP_MESSAGE, type Browser } from './browser';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';
import { ConversationKit, text } from '../conversations/conversation-kit';

const available = chromiumAvailable();
if (!available) console.warn(SKIP_MESSAGE);
const describeInChromium = available ? describe : describe.skip;

jest.setTimeout(120_000);

/** The messages the page shows: id, role and text, in order. */
async function shownMessages(page: Page): Promise<string[]> {
  return page.$$eval('[data-messages] > li:not([data-streaming])', (items) =>
    items.map((item) => {
      const element = item as unknown as { getAttribute(name: string): string | null; querySelector(selector: string): { textContent: string | null } | null };
      return `${element.getAttribute('data-message-id')}|${element.getAttribute('data-role')}|${element.querySelector('[data-content]')?.textContent ?? ''}`;
    }),
  );
}

describeInChromium.each(testDialects)('the chat pages in Chromium (%s)', (dialect) => {
  let t: TestServer;
  let browser: Browser;
  let base: string;
  const runs = new RunKit(() => t);
  const chats = new ConversationKit(() => t, runs);

  beforeAll(async () => {
    ensureConsoleBuilt();
    t = await startTestServer(dialect);
    base = t.url.replace(/\/graphql$/, '');
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await runs.closeProviders();
    await t?.stop();
  });

  it('opens a chat, streams two replies, refuses a send during a turn with the server\'s message, and shows the same messages after a reload', async () => {
    const setup = await runs.setup();
    const midway = gate();
    setup.provider.script(
      { text: 'Hello there', contentChunks: ['Hello ', 'there'] },
      // Held after its first piece: the page shows the reply while it is being made.
      { text: 'Part two', contentChunks: ['Part ', 'two'], holdAfter: { frames: 2, gate: midway.promise } },
    );
    const { page, errors, foreignRequests } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/chat`);
    await page.waitForSelector('[data-action="start-chat"]');
    expect(await page.getAttribute('nav a[href="/chat"]', 'aria-current')).toBe('page');
    await page.selectOption('[data-field="configuration"]', setup.configuration);
    await page.fill('[data-field="title"]', 'Browser chat');
    await page.click('[data-action="start-chat"]');
    await page.waitForURL(/\/chat\/[0-9a-f-]{36}$/);
    const id = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);
    await page.waitForSelector('h1:has-text("Browser chat")');

    await page.fill('[data-field="message"]', 'hi');
    await page.click('[data-action="send"]');
    await page.waitForSelector(`[data-messages] > li[data-message-id="${id}:1"]:not([data-streaming]) [data-content]:has-text("Hello there")`);

    await page.fill('[data-field="message"]', 'and the second?');
    await page.click('[data-action="send"]');
    await page.waitForSelector('[data-streaming="streaming"] [data-content]:has-text("Part")');
    await page.waitForSelector('[data-busy]');

    // A second send while the turn runs: the server refuses, and its message is shown.
    await page.fill('[data-field="message"]', 'too soon');
    await page.click('[data-action="send"]');
    await page.waitForSelector('[data-problem]:has-text("busy")');
    expect(await page.inputValue('[data-field="message"]')).toBe('too soon');

    await page.waitForSelector(`[data-messages] > li[data-message-id="${id}:2"]`);
    const before = await shownMessages(page);
    expect(before).toEqual([`${id}:0|user|hi`, `${id}:1|assistant|Hello there`, `${id}:2|user|and the second?`]);

    // Reloaded mid-history (the turn still running): the same messages, and the turn still shown as busy.
    await page.reload();
    await page.waitForSelector(`[data-messages] > li[data-message-id="${id}:2"]`);
    expect(await shownMessages(page)).toEqual(before);
    await page.waitForSelector('[data-busy]');
    midway.open();
    await page.waitForSelector(`[data-messages] > li[data-message-id="${id}:3"]:not([data-streaming]) [data-content]:has-text("Part two")`);
    await page.waitForSelector('[data-busy]', { state: 'detached' });
    expect(await shownMessages(page)).toEqual([...before, `${id}:3|assistant|Part two`]);
    expect(await page.$('[data-streaming]')).toBeNull();

    const stored = await chats.messages(id);
    expect(stored.map((m) => `${m.id}|${m.role}|${m.content}`)).toEqual(await shownMessages(page));
    await page.waitForLoadState('networkidle');
    // The refused send's 409 is the only error the browser logged.
    expect({ foreignRequests, errors: errors.filter((error) => !/status of 409/.test(error)) }).toEqual({ foreignRequests: [], errors: [] });
    await page.close();
  });

  it('a turn that left older turns out to fit the context window says so', async () => {
    // The acceptance figures: a 1000-token window, 500 reserved; 350-byte messages; turn 3 leaves 1 turn out.
    const setup = await runs.setup({ contextLength: 1000, maxOutputTokens: 500 });
    setup.provider.script({ text: text(350, 'b') }, { text: text(350, 'c') }, { text: text(350, 'd') });
    const conversation = await chats.start({ configuration: setup.configuration });
    for (const letter of ['x', 'y', 'z']) await chats.turn(conversation.id, text(350, letter));
    expect((await chats.messages(conversation.id))[4]!.droppedTurns).toBe(1);

    const { page, errors } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/chat/${conversation.id}`);
    await page.waitForSelector(`[data-messages] > li[data-message-id="${conversation.id}:5"]`);
    expect(await page.$$eval('[data-dropped-turns]', (items) => items.map((item) => (item as unknown as { getAttribute(name: string): string | null }).getAttribute('data-dropped-turns')))).toEqual(['1']);
    expect(await page.textContent(`li[data-message-id="${conversation.id}:4"] [data-dropped-turns]`)).toContain('1 earlier turn was left out');
    expect(errors).toEqual([]);
    await page.close();
  });
});
