/**
 * The snippet tools end to end: a run's search_snippets and get_snippet read
 * the database through the same rules as the API — the snippets a
 * configuration could compose (active, visible, not deleted:
 * isOfferedSnippet), tags matched as whole tags, text searched in identifier,
 * name, description, tags and text without regard to case
 * (snippetMatchesSearch, the rule of the snippet list's `search`).
 */
import { testDialects } from '../support/databases';
import { createSnippet } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier } from './run-kit';

describe.each(testDialects)('the snippet tools in a run (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);

  beforeAll(async () => {
    ts = await startTestServer(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
  });

  test('offer only active, visible, live snippets, found by tag and by text as the API finds them', async () => {
    const marker = uniqueIdentifier('mark');
    const tag = uniqueIdentifier('tag');
    const offered = await createSnippet(ts, { identifier: `${marker}_a`, name: 'A', description: `About ${marker}`, tags: [tag], sorting: 1 });
    const shouting = await createSnippet(ts, { identifier: `${marker}_e`, name: 'E', snippet: `In capitals: ${marker.toUpperCase()}.`, sorting: 2 });
    const hidden = await createSnippet(ts, { identifier: `${marker}_b`, name: 'B', snippet: `Hidden ${marker}`, tags: [tag], hidden: true });
    const inactive = await createSnippet(ts, { identifier: `${marker}_c`, name: 'C', snippet: `Inactive ${marker}`, tags: [tag], isActive: false });
    const deleted = await createSnippet(ts, { identifier: `${marker}_d`, name: 'D', snippet: `Deleted ${marker}`, tags: [tag] });
    await ts.ok('mutation($uid: Int!) { deleteSnippet(uid: $uid) }', { uid: deleted.uid });

    // The API's own search finds the same live, active, visible snippets the tools offer.
    const listed = await ts.ok<{ snippets: { identifier: string; isActive: boolean; hidden: boolean }[] }>(
      'query($search: String) { snippets(search: $search) { identifier isActive hidden } }',
      { search: marker },
    );
    const apiOffered = listed.snippets.filter((row) => row.isActive && !row.hidden).map((row) => row.identifier).sort();

    const setup = await kit.setup();
    setup.provider.script(
      {
        toolCalls: [
          { id: 'by_text', name: 'search_snippets', arguments: { query: marker } },
          { id: 'by_tag', name: 'search_snippets', arguments: { tag: tag.toUpperCase() } },
          { id: 'both', name: 'search_snippets', arguments: { tag, query: 'capitals' } },
          { id: 'get_offered', name: 'get_snippet', arguments: { identifier: offered.identifier } },
          { id: 'get_hidden', name: 'get_snippet', arguments: { identifier: hidden.identifier } },
          { id: 'get_inactive', name: 'get_snippet', arguments: { identifier: inactive.identifier } },
          { id: 'get_deleted', name: 'get_snippet', arguments: { identifier: deleted.identifier } },
        ],
        usage: { prompt: 10, completion: 5 },
      },
      { text: 'Read them.', usage: { prompt: 10, completion: 5 } },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'Look up snippets.', tools: ['search_snippets', 'get_snippet'] });
    const run = await kit.waitForRun(started.id);
    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'Read them.' });

    const results = new Map(run.steps.filter((step) => step.kind === 'TOOL').map((step) => [step.toolCallId, step]));
    const identifiers = (id: string) => (JSON.parse(results.get(id)!.toolResult!) as { identifier: string }[]).map((row) => row.identifier);

    expect(identifiers('by_text')).toEqual([offered.identifier, shouting.identifier]);
    expect([...identifiers('by_text')].sort()).toEqual(apiOffered);
    expect(identifiers('by_tag')).toEqual([offered.identifier]);
    expect(identifiers('both')).toEqual([]);
    expect(results.get('get_offered')).toMatchObject({ toolIsError: false });
    expect(JSON.parse(results.get('get_offered')!.toolResult!)).toEqual({ identifier: offered.identifier, name: 'A', tags: [tag], snippet: 'Some text.' });
    for (const id of ['get_hidden', 'get_inactive', 'get_deleted']) {
      expect(results.get(id)).toMatchObject({ toolIsError: true, toolResult: expect.stringMatching(/no active snippet with identifier/) });
    }
  });
});
