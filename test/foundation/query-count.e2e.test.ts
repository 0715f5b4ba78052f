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
    // Background work runs on its own timers: the prompt change detector (its reads of the tables
    // under the alias `detected`), run housekeeping (tx_nrllm_agentrun) and everything on the service's
    // own tables (versions, the webhook outbox, approval deadlines, the token's lookup once its 5 s cache
    // expired on a loaded machine). None of it is the list's; the list reads only the tx_nrllm_ tables it shows.
    const detector = /\bdetected\b|promptwire_|tx_nrllm_agentrun/i;
    return queries.filter((sql) => /^\s*SELECT/i.test(sql) && !detector.test(sql)).length;
  };

  /**
   * SELECTs of one request for its data, which here include the service's
   * own tables (versions, run provenance): the background's polls are left
   * out (the detector's reads under the alias `detected` and its
   * latest-version lookups, the outbox, run housekeeping by lease, approval
   * deadlines), and the token lookup (its cache entry may expire between two requests).
   */
  const selectsOf = async (query: string, variables: Record<string, unknown>) => {
    await t.ok(query, variables);
    const background = /\bdetected\b|MAX\(\W*l\W*\.\W*version|promptwire_webhook_delivery|promptwire_api_token|promptwire_run_lease|promptwire_run_approval_deadline/i;
    const once = async () => {
      queries = [];
      counting = true;
      const data = await t.ok<Record<string, { nodes?: unknown[]; edges?: unknown[] }>>(query, variables);
      counting = false;
      return { data, selects: queries.filter((sql) => /^\s*SELECT/i.test(sql) && !background.test(sql)).length };
    };
    // The fewer of two: a cache refreshed by chance in one request (the prompt library after a change) is not the list's cost; a query per row shows in both.
    const [first, second] = [await once(), await once()];
    return first.selects <= second.selects ? first : second;
  };

  it('a page of a connection with its relations costs the same queries for 5 rows as for 50: no query per row', async () => {
    const configurations = `query($first: Int) { configurationsConnection(first: $first) { totalCount pageInfo { hasNextPage hasPreviousPage endCursor } edges { cursor node {
      identifier effectiveSystemPrompt model { modelId provider { identifier } } skills { identifier } selectedSnippets { identifier } versions { version } releases { label }
    } } } }`;
    const fifty = await selectsOf(configurations, { first: 50 });
    const five = await selectsOf(configurations, { first: 5 });
    expect(fifty.data.configurationsConnection.edges).toHaveLength(50);
    // page joined with models and providers, count, skill relations, active snippets, versions, releases (hasPreviousPage without `after`: no query)
    expect(fifty.selects).toBeLessThanOrEqual(7);
    expect(fifty.selects).toBe(five.selects);

    for (let i = 0; i < 10; i += 1) await createSnippet(t, { tags: [unique('more')], snippet: `more ${i}` });
    const snippets = 'query($first: Int) { snippetsConnection(first: $first) { totalCount nodes { identifier versions { version } usedBy { identifier } } } }';
    const twelve = await selectsOf(snippets, { first: 12 });
    const two = await selectsOf(snippets, { first: 2 });
    expect(twelve.data.snippetsConnection.nodes).toHaveLength(12);
    expect(twelve.selects).toBe(two.selects);

    const rows = (await t.database.query('SELECT uid FROM tx_nrllm_configuration WHERE deleted = 0 ORDER BY uid LIMIT 12')) as { uid: number }[];
    for (const [index, { uid }] of rows.entries()) {
      const uuid = `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`;
      await t.database.query('INSERT INTO tx_nrllm_agentrun (uuid, status, configuration_uid, configuration_identifier, tstamp, crdate) VALUES (?,?,?,?,?,?)', [uuid, 'completed', uid, 'x', 1, 1 + index]);
      const [run] = (await t.database.query('SELECT uid FROM tx_nrllm_agentrun WHERE uuid = ?', [uuid])) as { uid: number }[];
      await t.database.query('INSERT INTO promptwire_run_provenance (run_uid, release_id, label, snippets) VALUES (?, NULL, ?, ?)', [run.uid, 'production', '[]']);
    }
    const runs = 'query($first: Int) { runsConnection(first: $first) { totalCount nodes { id configuration { identifier model { modelId } } releaseLabel release { label } snippetVersions { identifier } } } }';
    const manyRuns = await selectsOf(runs, { first: 12 });
    const fewRuns = await selectsOf(runs, { first: 2 });
    expect(manyRuns.data.runsConnection.nodes).toHaveLength(12);
    expect(manyRuns.selects).toBe(fewRuns.selects);
  });

  it('listing 50 configurations with model, provider, skills and snippets costs a bounded number of queries', async () => {
    const fifty = await countFor(50);
    const five = await countFor(5);
    // configurations joined with models and providers, skill relations, active snippets
    expect(fifty).toBeGreaterThanOrEqual(3);
    expect(fifty).toBeLessThanOrEqual(4);
    expect(fifty).toBe(five);
  });
});
