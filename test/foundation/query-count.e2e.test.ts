import { testDialects } from '../support/databases';
import { createConfiguration, createProviderAndModel, createSnippet, unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';

const LIST = `query($limit: Int) { configurations(limit: $limit) {
  identifier effectiveSystemPrompt
  model { modelId provider { identifier } }
  skills { identifier }
  selectedSnippets { identifier }
} }`;

describe.each(testDialects)('relation loading on %s', (dialect) => {
  let t: TestServer;
  let counting = false;
  let queries: string[] = [];
  beforeAll(async () => {
    t = await startTestServer(dialect, {
      // Background work (run housekeeping, the prompt-change poll) must not land among the counted queries.
      env: { RUN_LEASE_SECONDS: '600', PROMPT_CHANGE_POLL_MS: '8000' },
      server: {
        onQuery: (sql) => {
          if (counting) queries.push(sql);
        },
      },
    });
    const tags = [unique('persona'), unique('tone')];
    for (const tag of tags) await createSnippet(t, { tags: [tag], name: tag, snippet: `about ${tag}` });
    const skill = unique('skill');
    await t.ok('mutation($input: CreateSkillInput!) { createSkill(input: $input) { uid } }', { input: { identifier: skill, name: 'Skill', body: 'Body', enabled: true } });
    for (let i = 0; i < 50; i += 1) {
      const { model } = await createProviderAndModel(t);
      await createConfiguration(t, { model, snippetTags: tags, skills: [skill], systemPrompt: `Prompt ${i}` });
    }
  }, 120_000);
  afterAll(async () => t?.stop());

  const countFor = async (limit: number) => {
    await t.ok(LIST, { limit }); // warm the token cache
    queries = [];
    counting = true;
    const data = await t.ok<{ configurations: { model: unknown; skills: unknown[]; selectedSnippets: unknown[] }[] }>(LIST, { limit });
    counting = false;
    expect(data.configurations).toHaveLength(limit);
    expect(data.configurations.every((c) => c.model && c.skills.length === 1 && c.selectedSnippets.length === 2)).toBe(true);
    // The prompt change detector polls on its own timer (its reads of the tables under
    // the alias `detected`, and its version lookups), and so does the webhook outbox; those are not the list's
    // queries. Nor is the token's lookup: its cache lasts 5 s, which a loaded machine can outlast between warm-up and count.
    const detector = /\bdetected\b|promptwire_prompt_version|promptwire_webhook_delivery|promptwire_api_token/i;
    return queries.filter((sql) => /^\s*SELECT/i.test(sql) && !detector.test(sql)).length;
  };

  it('listing 50 configurations with model, provider, skills and snippets costs a bounded number of queries', async () => {
    const fifty = await countFor(50);
    const five = await countFor(5);
    // configurations joined with models and providers, skill relations, active snippets
    expect(fifty).toBeGreaterThanOrEqual(3);
    expect(fifty).toBeLessThanOrEqual(4);
    expect(fifty).toBe(five);
  });
});
