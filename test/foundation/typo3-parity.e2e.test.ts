/**
 * Cases where nr_llm's own code (0.33) and this service used to answer
 * differently on the same rows, through the running server: rows are written
 * by SQL, as TYPO3 writes them, and read over GraphQL.
 */
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { RawGraphQLSocket } from '../support/raw-graphql-ws';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { createTypo3Tables } from '../support/typo3-schema';

const now = 1_700_000_000;

describe.each(testDialects)('nr_llm parity on %s (rows written as TYPO3 writes them)', (dialect) => {
  let database: TestDatabase;
  let t: TestServer;
  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    await createTypo3Tables(database);
    t = await startTestServer(dialect, { database, env: { SCHEMA_MODE: 'shared' } });
  });
  afterAll(async () => t?.stop());

  const snippet = (identifier: string, name: string, tags: string, sorting = 0) =>
    database.query('INSERT INTO tx_nrllm_promptsnippet (tstamp, crdate, identifier, name, tags, snippet, sorting) VALUES (?,?,?,?,?,?,?)', [now, now, identifier, name, tags, `Text of ${identifier}.`, sorting]);

  it('orders snippets within a tag by the database\'s collation of the name, as nr_llm\'s ORDER BY sorting, name does', async () => {
    await snippet('upper_b', 'B', 'collation');
    await snippet('lower_a', 'a', 'collation');
    const data = await t.ok<{ snippets: { name: string }[] }>('{ snippets(tag: "collation") { name } }');
    // utf8mb4_unicode_ci compares without case (a before B); SQLite's BINARY compares bytes (B before a).
    expect(data.snippets.map((s) => s.name)).toEqual(dialect === 'mysql' ? ['a', 'B'] : ['B', 'a']);
    await database.query(
      'INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, system_prompt, snippet_tags) VALUES (?,?,?,?,?,?)',
      [now, now, 'collated', 'Collated', '', 'collation'],
    );
    const configuration = await t.ok<{ configuration: { effectiveSystemPrompt: string; composition: { parts: { snippet: { identifier: string } }[] } } }>(
      '{ configuration(identifier: "collated") { effectiveSystemPrompt composition { parts { snippet { identifier } } } } }',
    );
    const order = dialect === 'mysql' ? ['lower_a', 'upper_b'] : ['upper_b', 'lower_a'];
    const blocks = dialect === 'mysql' ? ['a:\nText of lower_a.', 'B:\nText of upper_b.'] : ['B:\nText of upper_b.', 'a:\nText of lower_a.'];
    expect(configuration.configuration.effectiveSystemPrompt).toBe(blocks.join('\n\n'));
    expect(configuration.configuration.composition.parts.map((part) => part.snippet.identifier)).toEqual(order);
  });

  it('lists the tag vocabulary as nr_llm\'s tag picker does (10,9,01,1 gives 01, 1, 9, 10)', async () => {
    await snippet('numbers', 'Numbers', '10,9,01,1');
    const tags = (await t.ok<{ snippetTags: string[] }>('{ snippetTags }')).snippetTags;
    const numeric = tags.filter((tag) => /^\d+$/.test(tag));
    expect(numeric).toEqual(['01', '1', '9', '10']);
  });

  it('a provider with nr_llm\'s default adapter_type \'\' reads and dry-runs; a live run ends FAILED with the reason', async () => {
    await database.query('INSERT INTO tx_nrllm_provider (tstamp, crdate, identifier, name) VALUES (?,?,?,?)', [now, now, 'unset', 'Not set up yet']);
    const [provider] = (await database.query("SELECT uid FROM tx_nrllm_provider WHERE identifier = 'unset'")) as { uid: number }[];
    await database.query('INSERT INTO tx_nrllm_model (tstamp, crdate, identifier, name, provider_uid, model_id) VALUES (?,?,?,?,?,?)', [now, now, 'unset-model', 'Unset', provider.uid, 'm']);
    const [model] = (await database.query("SELECT uid FROM tx_nrllm_model WHERE identifier = 'unset-model'")) as { uid: number }[];
    await database.query('INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, model_uid, system_prompt) VALUES (?,?,?,?,?,?)', [now, now, 'unset-conf', 'Unset', model.uid, 'Be brief.']);

    const providers = await t.ok<{ providers: { identifier: string; adapterType: string }[] }>('{ providers { identifier adapterType } }');
    expect(providers.providers).toContainEqual({ identifier: 'unset', adapterType: '' });

    const wait = async (id: string) => {
      for (let polls = 0; ; polls++) {
        const run = (await t.ok<{ run: { status: string; terminationReason: string | null; error: string | null; steps: { kind: string }[] } }>(
          'query($id: ID!) { run(id: $id) { status terminationReason error steps { kind } } }',
          { id },
        )).run;
        if ((run.status !== 'QUEUED' && run.status !== 'RUNNING') || polls > 500) return run;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const dry = await t.gql<{ startRun: { id: string } }>('mutation { startRun(input: { configuration: "unset-conf", prompt: "Hi", dryRun: true }) { id } }');
    expect(dry.errors).toBeUndefined();
    expect(await wait(dry.data!.startRun.id)).toEqual({ status: 'COMPLETED', terminationReason: 'dry_run', error: null, steps: [{ kind: 'ASSEMBLED' }, { kind: 'END' }] });

    const live = await t.gql<{ startRun: { id: string } }>('mutation { startRun(input: { configuration: "unset-conf", prompt: "Hi", tools: [] }) { id } }');
    expect(live.errors).toBeUndefined();
    const failed = await wait(live.data!.startRun.id);
    expect(failed).toMatchObject({ status: 'FAILED', terminationReason: 'provider_failed' });
    expect(failed.error).toMatch(/unknown adapter type ""/);
  });

  it('resolves forced snippets as nr_llm does: active only, twice when named twice, nova and NOVA apart', async () => {
    const insert = (identifier: string, name: string, text: string, active: number) =>
      database.query('INSERT INTO tx_nrllm_promptsnippet (tstamp, crdate, identifier, name, tags, snippet, is_active) VALUES (?,?,?,?,?,?,?)', [now, now, identifier, name, '', text, active]);
    await insert('nova', 'Nova', 'lower case', 1);
    await insert('NOVA', 'NOVA', 'upper case', 1);
    await insert('resting', 'Resting', 'inactive', 0);
    await database.query('INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, system_prompt) VALUES (?,?,?,?,?)', [now, now, 'forcing', 'Forcing', 'Base.']);
    const started = await t.ok<{ startRun: { id: string } }>(
      'mutation { startRun(input: { configuration: "forcing", prompt: "Hi", dryRun: true, forcedSnippets: ["nova", "NOVA", "resting", "nova"] }) { id } }',
    );
    let messages: { role: string; content: string }[] | null = null;
    for (let polls = 0; polls < 500 && !messages; polls++) {
      const run = (await t.ok<{ run: { steps: { kind: string; messagesSent: { role: string; content: string }[] | null }[] } }>(
        'query($id: ID!) { run(id: $id) { steps { kind messagesSent { role content } } } }',
        { id: started.startRun.id },
      )).run;
      messages = run.steps.find((step) => step.kind === 'ASSEMBLED')?.messagesSent ?? null;
      if (!messages) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(messages).toEqual([
      { role: 'system', content: 'Base.' },
      { role: 'system', content: 'Nova:\nlower case' },
      { role: 'system', content: 'NOVA:\nupper case' },
      { role: 'system', content: 'Nova:\nlower case' },
      { role: 'user', content: 'Hi' },
    ]);
  });

  it('reads metadata as nr_llm\'s getMetadataArray: a PHP list or what json_decode refuses is {}', async () => {
    const insert = (identifier: string, metadata: string) =>
      database.query('INSERT INTO tx_nrllm_promptsnippet (tstamp, crdate, identifier, name, tags, snippet, metadata) VALUES (?,?,?,?,?,?,?)', [now, now, identifier, identifier, 'metadata_case', 'x', metadata]);
    await insert('list_like', '{"0":"x"}');
    await insert('surrogate', '{"a":"\\ud800"}');
    await insert('keyed', '{"1":"a","voice":"nova"}');
    const data = await t.ok<{ snippets: { identifier: string; metadata: unknown }[] }>('{ snippets(tag: "metadata_case") { identifier metadata } }');
    expect(Object.fromEntries(data.snippets.map((s) => [s.identifier, s.metadata]))).toEqual({ list_like: {}, surrogate: {}, keyed: { 1: 'a', voice: 'nova' } });
  });

  /** The `metadata` of each snippet tagged `tag` as the response's own bytes, by identifier. */
  const metadataTexts = async (tag: string): Promise<Record<string, string>> => {
    const body = await t.gqlText('query($tag: String) { snippets(tag: $tag) { identifier metadata } }', { tag });
    return Object.fromEntries([...body.matchAll(/\{"identifier":"([^"]+)","metadata":(.*?)\}(?=,\{"identifier"|\]\})/g)].map((match) => [match[1], match[2]]));
  };

  it('writes metadata with nr_llm\'s values and key order: integers beyond 2^53 exact, 0.0 a float, {"b":2,"1":"a"} as b, 1', async () => {
    const insert = (identifier: string, metadata: string) =>
      database.query('INSERT INTO tx_nrllm_promptsnippet (tstamp, crdate, identifier, name, tags, snippet, metadata) VALUES (?,?,?,?,?,?,?)', [now, now, identifier, identifier, 'metadata_bytes', 'x', metadata]);
    await insert('order', '{"b":2,"1":"a"}');
    await insert('seed', '{"seed": 9007199254740993, "t": 0.0, "nested": {"z": 1, "10": 2}}');
    await insert('list_like', '{"0":"x"}');
    await insert('reversed', '{"1":"a","0":"b"}');
    await insert('surrogate', '{"a":"\\ud800"}');
    await insert('deep_512', '{"a":' + '['.repeat(511) + ']'.repeat(511) + '}');
    await insert('deep_513', '{"a":' + '['.repeat(512) + ']'.repeat(512) + '}');
    expect(await metadataTexts('metadata_bytes')).toEqual({
      order: '{"b":2,"1":"a"}',
      seed: '{"seed":9007199254740993,"t":0.0,"nested":{"z":1,"10":2}}',
      list_like: '{}',
      reversed: '{"1":"a","0":"b"}',
      surrogate: '{}',
      deep_512: '{"a":' + '['.repeat(511) + ']'.repeat(511) + '}',
      deep_513: '{}',
    });
  });

  it('reads options and call options as nr_llm decodes and merges them, byte for byte', async () => {
    await database.query('INSERT INTO tx_nrllm_provider (tstamp, crdate, identifier, name, adapter_type) VALUES (?,?,?,?,?)', [now, now, 'php-json', 'PHP JSON', 'openai']);
    const [provider] = (await database.query("SELECT uid FROM tx_nrllm_provider WHERE identifier = 'php-json'")) as { uid: number }[];
    await database.query('INSERT INTO tx_nrllm_model (tstamp, crdate, identifier, name, provider_uid, model_id, default_timeout, max_output_tokens) VALUES (?,?,?,?,?,?,?,?)', [
      now, now, 'php-json-model', 'PHP JSON model', provider.uid, 'm', 0, 4096,
    ]);
    const [model] = (await database.query("SELECT uid FROM tx_nrllm_model WHERE identifier = 'php-json-model'")) as { uid: number }[];
    const configuration = (identifier: string, options: string, translator = '') =>
      database.query('INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, model_uid, system_prompt, max_tokens, translator, options) VALUES (?,?,?,?,?,?,?,?,?)', [
        now, now, identifier, identifier, model.uid, '', 0, translator, options,
      ]);
    await configuration('merged', '{"provider":"x","seed":9007199254740993,"max_tokens":0.0,"b":2,"1":"a"}', 'deepl');
    await configuration('listed', '["a"]');
    await configuration('renumbered', '{"5":"x"}');
    await configuration('broken', '{"seed":');
    await database.query('INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, system_prompt) VALUES (?,?,?,?,?)', [now, now, 'c', 'No model', '']);

    const read = (identifier: string) => t.gqlText('query($identifier: String) { configuration(identifier: $identifier) { options callOptions } }', { identifier });
    const base = '"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"m"';
    expect(await read('merged')).toBe(
      '{"data":{"configuration":{"options":{"provider":"x","seed":9007199254740993,"max_tokens":0.0,"b":2,"1":"a"},' +
        `"callOptions":{${base},"translator":"deepl","timeout":0,"seed":9007199254740993,"max_tokens":0.0,"b":2,"0":"a"}}}}\n`,
    );
    expect(await read('listed')).toBe(`{"data":{"configuration":{"options":{"0":"a"},"callOptions":{${base},"timeout":0,"0":"a","max_tokens":4096}}}}\n`);
    expect(await read('renumbered')).toBe(`{"data":{"configuration":{"options":{"5":"x"},"callOptions":{${base},"timeout":0,"0":"x","max_tokens":4096}}}}\n`);
    expect(await read('broken')).toBe(`{"data":{"configuration":{"options":{},"callOptions":{${base},"timeout":0,"max_tokens":4096}}}}\n`);

    // A release freezes them as they are, and gives them back the same.
    const merged = `{${base},"translator":"deepl","timeout":0,"seed":9007199254740993,"max_tokens":0.0,"b":2,"0":"a"}`;
    expect(await t.gqlText('mutation { publishConfiguration(identifier: "merged", label: "live") { callOptions } }')).toBe(`{"data":{"publishConfiguration":{"callOptions":${merged}}}}\n`);
    expect(await t.gqlText('{ configurationRelease(identifier: "merged", label: "live") { callOptions } }')).toBe(`{"data":{"configurationRelease":{"callOptions":${merged}}}}\n`);
    expect(await t.gqlText('mutation { publishConfiguration(identifier: "merged", label: "live") { id } }')).toBe(await t.gqlText('mutation { publishConfiguration(identifier: "merged", label: "live") { id } }'));

    const withoutModel = await t.gql<{ configuration: { callOptions: unknown } }>('{ configuration(identifier: "c") { callOptions } }');
    expect(withoutModel.data?.configuration).toEqual({ callOptions: null });
    expect(withoutModel.errors?.map((error) => [error.message, error.extensions?.code])).toEqual([['Configuration "c" has no model assigned', 'NOT_FOUND']]);

    // The same bytes over graphql-ws.
    const socket = await RawGraphQLSocket.connect(t.server.wsUrl, ADMIN_TOKEN);
    try {
      socket.subscribe('1', '{ configuration(identifier: "merged") { callOptions } }');
      await socket.waitFor((message) => message.type === 'complete' && message.id === '1');
      expect(socket.texts.find((text) => text.includes('"type":"next"'))).toContain(
        `"callOptions":{${base},"translator":"deepl","timeout":0,"seed":9007199254740993,"max_tokens":0.0,"b":2,"0":"a"}`,
      );
    } finally {
      socket.close();
    }
  });
});
