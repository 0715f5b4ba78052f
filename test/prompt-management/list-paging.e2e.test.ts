/**
 * Lists a CMS pages through, against the running server: snippetsConnection,
 * configurationsConnection and runsConnection read page by page with
 * cursors give every row exactly once, in the order of the limit/offset
 * lists on this database (with its collation), also when rows are inserted
 * or deleted between pages; filters combine, totalCount counts the filtered
 * list, cursors are checked, rows written by SQL as TYPO3 writes them (NULLs,
 * odd tag lists) list and filter as they read.
 */
import crypto from 'node:crypto';
import { hasTag } from '../../src/prompt/tags';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';
import { testDialects } from '../support/databases';
import { createConfiguration, createSnippet, unique } from '../support/factories';
import { type GraphQLResponse, startTestServer, type TestServer } from '../support/server';

interface PageInfo {
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  startCursor: string | null;
  endCursor: string | null;
}

interface ConnectionPage<N> {
  totalCount: number;
  pageInfo: PageInfo;
  edges: { cursor: string; node: N }[];
  nodes: N[];
}

const CONNECTION_FIELDS = (node: string) => `totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { ${node} } } nodes { ${node} }`;

const SNIPPETS = `query($first: Int, $after: String, $filter: SnippetFilter) {
  snippetsConnection(first: $first, after: $after, filter: $filter) { ${CONNECTION_FIELDS('uid identifier name sorting')} }
}`;
const CONFIGURATIONS = `query($first: Int, $after: String, $filter: ConfigurationFilter) {
  configurationsConnection(first: $first, after: $after, filter: $filter) { ${CONNECTION_FIELDS('uid identifier name snippetTags model { identifier provider { identifier } }')} }
}`;
const RUNS = `query($first: Int, $after: String, $filter: RunFilter) {
  runsConnection(first: $first, after: $after, filter: $filter) { ${CONNECTION_FIELDS('id status createdAt configurationIdentifier releaseLabel')} }
}`;

type Uid = number | string;
type Keyed = { uid?: number; id?: string };
const keyOf = (node: Keyed): Uid => node.uid ?? node.id ?? '';

/**
 * Reads a connection page by page (`first` rows each) until hasNextPage is
 * false, checking each page's own consistency; `between` runs after page n.
 */
async function readAll<N extends Keyed>(
  t: TestServer,
  query: string,
  field: string,
  first: number,
  filter: Record<string, unknown> | null,
  between?: (pageNumber: number, page: ConnectionPage<N>) => Promise<void>,
): Promise<{ keys: Uid[]; pages: ConnectionPage<N>[] }> {
  const pages: ConnectionPage<N>[] = [];
  let after: string | null = null;
  for (let guard = 0; guard < 200; guard += 1) {
    const data: Record<string, ConnectionPage<N>> = await t.ok<Record<string, ConnectionPage<N>>>(query, { first, after, filter });
    const page: ConnectionPage<N> = data[field];
    pages.push(page);
    expect(page.nodes.map(keyOf)).toEqual(page.edges.map((edge) => keyOf(edge.node)));
    expect(page.pageInfo.hasPreviousPage).toBe(after !== null);
    expect(page.pageInfo.startCursor).toBe(page.edges[0]?.cursor ?? null);
    expect(page.pageInfo.endCursor).toBe(page.edges[page.edges.length - 1]?.cursor ?? null);
    if (page.pageInfo.hasNextPage) expect(page.edges).toHaveLength(first);
    else break;
    after = page.pageInfo.endCursor;
    await between?.(pages.length, page);
  }
  return { keys: pages.flatMap((page) => page.edges.map((edge) => keyOf(edge.node))), pages };
}

function expectEachOnce(keys: readonly Uid[]): void {
  expect(new Set(keys).size).toBe(keys.length);
}

function expectRefused(result: GraphQLResponse, field: string, message?: RegExp): void {
  expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  expect(result.errors?.[0]?.extensions?.field).toBe(field);
  if (message) expect(result.errors?.[0]?.message).toMatch(message);
}

const now = () => Math.floor(Date.now() / 1000);

describe.each(testDialects)('lists a CMS pages through (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });
  afterAll(async () => {
    await t?.stop();
    await kit.closeProviders();
  });

  /** A snippet row written by SQL, as TYPO3 writes it. */
  const insertSnippet = async (fields: { identifier?: string; name: string; tags: string; sorting?: number | string; description?: string | null; snippet?: string | null; metadata?: string | null; isActive?: number | string; hidden?: number; deleted?: number }) => {
    const identifier = fields.identifier ?? unique('sql');
    await t.database.query(
      'INSERT INTO tx_nrllm_promptsnippet (pid, tstamp, crdate, deleted, hidden, identifier, name, description, tags, snippet, metadata, is_active, sorting) VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      [now(), now(), fields.deleted ?? 0, fields.hidden ?? 0, identifier, fields.name, fields.description ?? null, fields.tags, fields.snippet === undefined ? 'Text.' : fields.snippet, fields.metadata ?? null, fields.isActive ?? 1, fields.sorting ?? 0],
    );
    const [row] = (await t.database.query('SELECT uid FROM tx_nrllm_promptsnippet WHERE identifier = ?', [identifier])) as { uid: number }[];
    return row.uid;
  };

  const snippetList = async (variables: Record<string, unknown>) =>
    (await t.ok<{ snippets: { uid: number }[] }>('query($tag: String, $limit: Int, $offset: Int) { snippets(tag: $tag, limit: $limit, offset: $offset) { uid } }', variables)).snippets.map((row) => row.uid);

  describe('snippets', () => {
    it('pages of 7 through 25 snippets give each exactly once, in the order snippets(tag:) lists them with this database\'s collation', async () => {
      const tag = unique('paging');
      // Names that collate differently on the two databases: case, accents, trailing spaces, equal names.
      const names = ['a', 'B', 'b', 'A', 'á', 'Z', 'é', 'e', 'same', 'same', 'same', 'Ä', 'ä', 'ab', 'aB', 'Ab', 'ß', 'ss', '10', '9'];
      for (const [index, name] of names.entries()) await createSnippet(t, { tags: [tag], name, sorting: index % 3 });
      for (const name of ['z ', ' b', 'a ', 'b  ', 'same ']) await insertSnippet({ name, tags: tag, sorting: 1 });

      const expected = await snippetList({ tag, limit: 500 });
      expect(expected).toHaveLength(25);
      const { keys, pages } = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 7, { tags: [tag] });
      expect(keys).toEqual(expected);
      expect(pages.map((page) => page.edges.length)).toEqual([7, 7, 7, 4]);
      expect(pages.every((page) => page.totalCount === 25)).toBe(true);

      // Without a filter: every snippet of the table, in the order of snippets(limit:).
      const all = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 7, null);
      expectEachOnce(all.keys);
      expect(all.keys).toEqual(await snippetList({ limit: 500 }));
    });

    it('rows inserted and deleted between pages: the others are read once each, in order; a new row after the cursor is read, one before it is not', async () => {
      const tag = unique('moving');
      const created: number[] = [];
      for (let index = 0; index < 25; index += 1) created.push((await createSnippet(t, { tags: [tag], name: `Row ${String(index).padStart(2, '0')}`, sorting: 10 + index })).uid);
      let cursorRow = 0;
      let before = 0;
      let afterRow = 0;
      let middle = 0;
      const { keys, pages } = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 7, { tags: [tag] }, async (pageNumber, page) => {
        if (pageNumber === 1) {
          cursorRow = page.edges[6].node.uid;
          // The cursor's own row goes: its cursor still marks the place.
          await t.ok('mutation($uid: Int!) { deleteSnippet(uid: $uid) }', { uid: cursorRow });
          await t.ok('mutation($uid: Int!) { deleteSnippet(uid: $uid) }', { uid: created[20] });
          before = (await createSnippet(t, { tags: [tag], name: 'Before', sorting: 0 })).uid;
          afterRow = (await createSnippet(t, { tags: [tag], name: 'After', sorting: 1000 })).uid;
        }
        if (pageNumber === 2) middle = (await createSnippet(t, { tags: [tag], name: 'Row 18a', sorting: 28 })).uid;
      });
      expectEachOnce(keys);
      const expected = [...created.slice(0, 19), middle, created[19], ...created.slice(21), afterRow];
      expect(keys).toEqual(expected);
      expect(keys).not.toContain(before);
      expect(keys).toContain(cursorRow);
      // totalCount counts the list as it is when each page is read.
      expect(pages.map((page) => page.totalCount)).toEqual([25, 25, 26, 26]);
    });

    it('filters combine: several tags (any or all), active, hidden and text; totalCount counts the filtered list', async () => {
      const [x, y] = [unique('fx'), unique('fy')];
      const needle = unique('needle');
      const make = async (name: string, tags: string[], fields: { isActive?: boolean; hidden?: boolean; description?: string } = {}) => ({ name, tags, ...fields, uid: (await createSnippet(t, { name, tags, ...fields })).uid });
      const rows = [
        await make('x only', [x]),
        await make('y only', [y]),
        await make('x and y', [x, y], { description: `with ${needle.toUpperCase()} inside` }),
        await make('x inactive', [x], { isActive: false }),
        await make('x y hidden', [y, x], { hidden: true }),
        await make('x hidden inactive', [x], { hidden: true, isActive: false, description: needle }),
        await make('neither', ['other'], { description: needle }),
      ];
      const expectFilter = async (filter: Record<string, unknown>, wanted: (row: (typeof rows)[number]) => boolean) => {
        const { keys, pages } = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 2, filter);
        const expected = rows.filter(wanted).map((row) => row.uid);
        expect([...keys].sort()).toEqual([...expected].sort());
        expect(pages[0].totalCount).toBe(expected.length);
      };
      await expectFilter({ tags: [x, y] }, (row) => row.tags.includes(x) || row.tags.includes(y));
      await expectFilter({ tags: [x, y], tagsMatch: 'ALL' }, (row) => row.tags.includes(x) && row.tags.includes(y));
      await expectFilter({ tags: [` ${x.toUpperCase()} `], isActive: true }, (row) => row.tags.includes(x) && row.isActive !== false);
      await expectFilter({ tags: [x, y], hidden: false, isActive: true }, (row) => (row.tags.includes(x) || row.tags.includes(y)) && !row.hidden && row.isActive !== false);
      await expectFilter({ tags: [x], hidden: true }, (row) => row.tags.includes(x) && row.hidden === true);
      await expectFilter({ tags: [x, y, 'other'], search: needle }, (row) => row.description?.toLowerCase().includes(needle) === true);
      await expectFilter({ search: needle, isActive: false }, (row) => row.description?.toLowerCase().includes(needle) === true && row.isActive === false);
      // A tag that normalises to nothing matches nothing; with ALL, the whole filter matches nothing.
      await expectFilter({ tags: ['  ', x] }, (row) => row.tags.includes(x));
      await expectFilter({ tags: ['  ', x], tagsMatch: 'ALL' }, () => false);
    });

    it('rows TYPO3 wrote with NULLs, empty and odd tag lists are listed, and a tag filter finds exactly what the tag lookup finds', async () => {
      const tag = unique('odd');
      const csvs = ['', tag, ` ${tag.toUpperCase()} ,x`, `x,,${tag}`, `\t${tag}\n`, `life${tag}`, `${tag}s`, `${tag} x`, `,${tag},`, `x, ${tag}`, `${tag},${tag}`, ' , ,', 'x'];
      const uids: number[] = [];
      for (const [index, csv] of csvs.entries()) {
        uids.push(await insertSnippet({ name: `Odd ${index}`, tags: csv, description: null, snippet: index % 2 ? null : '', metadata: index % 3 ? null : 'not json', sorting: index % 4 }));
      }
      await insertSnippet({ name: 'Odd deleted', tags: tag, deleted: 1 });
      const wanted = uids.filter((_, index) => hasTag(csvs[index], tag));
      const lookup = await snippetList({ tag, limit: 500 });
      expect([...lookup].sort()).toEqual([...wanted].sort());

      const { keys, pages } = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 2, { tags: [tag] });
      expect(keys).toEqual(lookup);
      expect(pages[0].totalCount).toBe(wanted.length);
      const both = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 3, { tags: [tag, 'x'], tagsMatch: 'ALL' });
      expect([...both.keys].sort()).toEqual(uids.filter((_, index) => hasTag(csvs[index], tag) && hasTag(csvs[index], 'x')).sort());

      // The odd rows read as the API reads them, through a search that finds all of them.
      const data = await t.ok<{ snippetsConnection: { totalCount: number; nodes: { uid: number; description: string | null; snippet: string; metadata: unknown; tags: string[] }[] } }>(
        'query($filter: SnippetFilter) { snippetsConnection(first: 500, filter: $filter) { totalCount nodes { uid description snippet metadata tags } } }',
        { filter: { search: 'Odd ' } },
      );
      expect(data.snippetsConnection.totalCount).toBe(csvs.length);
      for (const node of data.snippetsConnection.nodes) {
        expect(node.description).toBeNull();
        expect(node.metadata).toEqual({});
        expect(typeof node.snippet).toBe('string');
        expect(Array.isArray(node.tags)).toBe(true);
      }
    });

    if (dialect === 'sqlite') {
      it('on SQLite, text in an integer column sorts after every number in the list and in its pages alike', async () => {
        const tag = unique('text_sorting');
        for (let index = 0; index < 5; index += 1) await createSnippet(t, { tags: [tag], name: `Number ${index}`, sorting: index });
        await insertSnippet({ name: 'Text sorting', tags: tag, sorting: 'abc' });
        await insertSnippet({ name: 'Text switch', tags: tag, sorting: 2, isActive: 'yes' });
        const { keys } = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 2, { tags: [tag] });
        expect(keys).toHaveLength(7);
        const lookup = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 500, { tags: [tag], isActive: true });
        // `yes` reads as off (Number('yes') is NaN), so the tag lookup (active only) leaves it out too.
        expect(lookup.keys).toEqual(await snippetList({ tag, limit: 500 }));
        expect(lookup.keys).toHaveLength(6);
        expect(keys.filter((key) => lookup.keys.includes(key))).toEqual(lookup.keys);
      });
    }

    it('limit and offset still work beside the cursors', async () => {
      const tag = unique('offset');
      for (let index = 0; index < 12; index += 1) await createSnippet(t, { tags: [tag], name: `Offset ${index}`, sorting: index % 5 });
      const { pages } = await readAll<{ uid: number }>(t, SNIPPETS, 'snippetsConnection', 5, { tags: [tag] });
      expect(await snippetList({ tag, limit: 5, offset: 5 })).toEqual(pages[1].edges.map((edge) => edge.node.uid));
      expectRefused(await t.gql('{ snippets(limit: 501) { uid } }'), 'limit');
    });
  });

  describe('cursors and page sizes are checked', () => {
    it('a malformed, altered or foreign cursor is BAD_USER_INPUT naming `after`; first outside 0–500 naming `first`', async () => {
      const tag = unique('cursor');
      await createSnippet(t, { tags: [tag] });
      await createSnippet(t, { tags: [tag] });
      await createConfiguration(t, {});
      const page = (await t.ok<{ snippetsConnection: ConnectionPage<{ uid: number }> }>(SNIPPETS, { first: 1, filter: { tags: [tag] } })).snippetsConnection;
      const cursor = page.pageInfo.endCursor ?? '';
      const configurationCursor = (await t.ok<{ configurationsConnection: ConnectionPage<{ uid: number }> }>(CONFIGURATIONS, { first: 1 })).configurationsConnection.pageInfo.endCursor;

      expectRefused(await t.gql(SNIPPETS, { first: 1, after: 'not a cursor' }), 'after', /^The cursor is not valid: ask for the first page again/);
      expectRefused(await t.gql(SNIPPETS, { first: 1, after: `${cursor.slice(0, -2)}` }), 'after');
      expectRefused(await t.gql(SNIPPETS, { first: 1, after: Buffer.from('["snippets",0,"a"]').toString('base64url') }), 'after');
      expectRefused(await t.gql(SNIPPETS, { first: 1, after: configurationCursor }), 'after', /another list/);
      expectRefused(await t.gql(RUNS, { first: 1, after: cursor }), 'after', /another list/);
      expectRefused(await t.gql(SNIPPETS, { first: 501 }), 'first', /between 0 and 500/);
      expectRefused(await t.gql(CONFIGURATIONS, { first: -1 }), 'first');
      expectRefused(await t.gql(RUNS, { first: 501 }), 'first');
      expectRefused(await t.gql(SNIPPETS, { first: 1, filter: { search: 'x'.repeat(1001) } }), 'search');
      expectRefused(await t.gql(SNIPPETS, { first: 1, filter: { tags: Array.from({ length: 51 }, (_, index) => `t${index}`) } }), 'tags');
      expectRefused(await t.gql(RUNS, { first: 1, filter: { label: 'not a label!' } }), 'label');
      // The cursor itself still works, and first: 0 answers no rows but says whether there are any.
      const next = (await t.ok<{ snippetsConnection: ConnectionPage<{ uid: number }> }>(SNIPPETS, { first: 5, after: cursor, filter: { tags: [tag] } })).snippetsConnection;
      expect(next.edges).toHaveLength(1);
      const none = (await t.ok<{ snippetsConnection: ConnectionPage<{ uid: number }> }>(SNIPPETS, { first: 0, filter: { tags: [tag] } })).snippetsConnection;
      expect(none).toMatchObject({ edges: [], totalCount: 2, pageInfo: { hasNextPage: true, endCursor: null } });
    });
  });

  describe('configurations', () => {
    it('pages of 7 through 25 configurations give each exactly once in the order of configurations(limit:), with models; a tag filter reads snippetTags by the tag rules', async () => {
      const tag = unique('conf_tag');
      const setup = await kit.setup();
      const tagged: number[] = [];
      const names = ['a', 'B', 'b', 'A', 'á', 'same', 'same', 'Z', 'é', 'e'];
      for (let index = 0; index < 25; index += 1) {
        const tags = index % 2 ? [tag, 'other'] : ['other'];
        const created = await createConfiguration(t, { name: names[index % names.length], snippetTags: tags, model: index % 3 ? setup.modelIdentifier : null, sorting: index % 4 });
        if (index % 2) tagged.push(created.uid);
      }
      // Written by TYPO3: odd spacing and case in snippet_tags, a NULL description; and one whose tags only look alike.
      const written = unique('sqlconf');
      await t.database.query('INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, system_prompt, snippet_tags, description) VALUES (?,?,?,?,?,?,?)', [now(), now(), written, 'Written by SQL', '', ` x , ${tag.toUpperCase()}\t`, null]);
      await t.database.query('INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, system_prompt, snippet_tags, description) VALUES (?,?,?,?,?,?,?)', [now(), now(), unique('sqlconf'), 'Lookalike', '', `${tag}x,x${tag}`, null]);
      const [writtenRow] = (await t.database.query('SELECT uid FROM tx_nrllm_configuration WHERE identifier = ?', [written])) as { uid: number }[];

      const list = (await t.ok<{ configurations: { uid: number }[] }>('{ configurations(limit: 500) { uid } }')).configurations.map((row) => row.uid);
      const all = await readAll<{ uid: number; model: { identifier: string; provider: { identifier: string } } | null }>(t, CONFIGURATIONS, 'configurationsConnection', 7, null);
      expectEachOnce(all.keys);
      expect(all.keys).toEqual(list);
      const withModel = all.pages.flatMap((page) => page.nodes).filter((node) => node.model);
      expect(withModel.length).toBeGreaterThanOrEqual(16);
      expect(withModel.every((node) => node.model?.provider.identifier === setup.providerIdentifier)).toBe(true);

      const filtered = await readAll<{ uid: number }>(t, CONFIGURATIONS, 'configurationsConnection', 7, { tags: [tag] });
      expect(filtered.keys).toEqual(list.filter((uid) => tagged.includes(uid) || uid === writtenRow.uid));
      expect(filtered.pages[0].totalCount).toBe(13);
      const limited = (await t.ok<{ configurations: { uid: number }[] }>('{ configurations(limit: 7, offset: 7) { uid } }')).configurations.map((row) => row.uid);
      expect(limited).toEqual(all.pages[1].edges.map((edge) => edge.node.uid));
    });
  });

  describe('runs', () => {
    /** A run row written by SQL, as nr_llm writes its own runs. */
    const insertRun = async (fields: { status: string; crdate: number; configuration: string; label?: string }) => {
      const uuid = crypto.randomUUID();
      await t.database.query('INSERT INTO tx_nrllm_agentrun (uuid, status, configuration_identifier, tstamp, crdate) VALUES (?,?,?,?,?)', [uuid, fields.status, fields.configuration, fields.crdate, fields.crdate]);
      if (fields.label) {
        const [row] = (await t.database.query('SELECT uid FROM tx_nrllm_agentrun WHERE uuid = ?', [uuid])) as { uid: number }[];
        await t.database.query('INSERT INTO promptwire_run_provenance (run_uid, release_id, label, snippets) VALUES (?, NULL, ?, ?)', [row.uid, fields.label, '[]']);
      }
      return uuid;
    };

    it('pages of 7 through 25 runs give each exactly once, newest first as runs(limit:); a newer run started between pages is not read, an older one is; filters by status, configuration, label and time combine', async () => {
      const configuration = unique('runconf');
      const other = unique('otherconf');
      const base = 1_600_000_000;
      const statuses = ['completed', 'failed', 'running', ' RUNNING ', 'waiting_for_input', 'queued', 'cancelled', 'paused', 'COMPLETED', 'waiting_for_approval'];
      const runs: { id: string; status: string; crdate: number; configuration: string; label?: string }[] = [];
      for (let index = 0; index < 25; index += 1) {
        // Several runs share a second: the uid decides among them.
        const run = { status: statuses[index % statuses.length], crdate: base + Math.floor(index / 3) * 60, configuration: index % 4 === 0 ? other : index % 2 ? configuration : configuration.toUpperCase(), label: index % 5 === 0 ? 'production' : index % 5 === 1 ? 'staging' : undefined };
        runs.push({ ...run, id: await insertRun(run) });
      }
      const ours = new Set(runs.map((run) => run.id));
      const ourRuns = async () => (await t.ok<{ runs: { id: string }[] }>('{ runs(limit: 500) { id } }')).runs.map((run) => run.id).filter((id) => ours.has(id));
      const list = await ourRuns();
      const window = { createdFrom: new Date((base - 3600) * 1000).toISOString(), createdBefore: new Date((base + 540) * 1000).toISOString() };
      const newer = { status: 'queued', crdate: base + 480, configuration };
      const older = { status: 'queued', crdate: base - 60, configuration };
      const { keys, pages } = await readAll<{ id: string }>(t, RUNS, 'runsConnection', 7, window, async (pageNumber) => {
        if (pageNumber === 1) {
          // Newest first: a run of the newest second sorts before the cursor, an older one after it.
          runs.push({ ...newer, id: await insertRun(newer) }, { ...older, id: await insertRun(older) });
        }
      });
      const [newerId, olderId] = runs.slice(25).map((run) => run.id);
      expectEachOnce(keys);
      expect(keys.slice(0, -1)).toEqual(list);
      expect(keys).not.toContain(newerId);
      expect(keys[keys.length - 1]).toBe(olderId);
      expect(pages[0].totalCount).toBe(25);

      for (const run of runs) ours.add(run.id);
      const listNow = await ourRuns();
      const expectRuns = async (filter: Record<string, unknown>, wanted: (run: (typeof runs)[number]) => boolean) => {
        const read = await readAll<{ id: string }>(t, RUNS, 'runsConnection', 4, { ...window, ...filter });
        const expected = listNow.filter((id) => wanted(runs.find((run) => run.id === id)!));
        expect(read.keys).toEqual(expected);
        expect(read.pages[0].totalCount).toBe(expected.length);
      };
      const shows = (status: string) => {
        const read = status.trim().toUpperCase();
        return read === 'WAITING_FOR_INPUT' ? 'RUNNING' : ['QUEUED', 'RUNNING', 'WAITING_FOR_APPROVAL', 'COMPLETED', 'FAILED', 'CANCELLED'].includes(read) ? read : 'FAILED';
      };
      await expectRuns({ status: ['RUNNING'] }, (run) => shows(run.status) === 'RUNNING');
      await expectRuns({ status: ['FAILED', 'COMPLETED'] }, (run) => ['FAILED', 'COMPLETED'].includes(shows(run.status)));
      await expectRuns({ status: ['QUEUED'], configuration }, (run) => shows(run.status) === 'QUEUED' && run.configuration.toLowerCase() === configuration);
      await expectRuns({ configuration: ` ${configuration.toUpperCase()} ` }, (run) => run.configuration.toLowerCase() === configuration);
      await expectRuns({ label: 'Production' }, (run) => run.label === 'production');
      await expectRuns({ label: 'staging', configuration }, (run) => run.label === 'staging' && run.configuration.toLowerCase() === configuration);
      await expectRuns({ createdFrom: new Date((base + 120) * 1000 + 1).toISOString(), createdBefore: new Date((base + 300) * 1000).toISOString() }, (run) => run.crdate >= base + 180 && run.crdate < base + 300);
      await expectRuns({ status: ['CANCELLED'], label: 'production', configuration: other }, (run) => shows(run.status) === 'CANCELLED' && run.label === 'production' && run.configuration === other);
      const limited = (await t.ok<{ runs: { id: string }[] }>('{ runs(limit: 3, offset: 2) { id } }')).runs.map((run) => run.id);
      const first = (await t.ok<{ runsConnection: ConnectionPage<{ id: string }> }>(RUNS, { first: 5 })).runsConnection.edges.map((edge) => edge.node.id);
      expect(limited).toEqual(first.slice(2, 5));
    });

    it('a run started with a release label is found by it, with its configuration and label read in one batch', async () => {
      const setup = await kit.setup({ systemPrompt: 'Be brief.' });
      const label = uniqueIdentifier('rel').replace(/_/g, '-');
      await t.ok('mutation($identifier: String!, $label: String!) { publishConfiguration(identifier: $identifier, label: $label) { id } }', { identifier: setup.configuration, label });
      const labelled = await kit.startRun({ configuration: setup.configuration, prompt: 'hello', label, dryRun: true });
      await kit.startRun({ configuration: setup.configuration, prompt: 'hello', dryRun: true });
      await kit.waitForRun(labelled.id);
      const data = await t.ok<{ runsConnection: { totalCount: number; nodes: { id: string; releaseLabel: string | null; configuration: { identifier: string } | null; release: { label: string } | null }[] } }>(
        'query($filter: RunFilter) { runsConnection(filter: $filter) { totalCount nodes { id releaseLabel configuration { identifier } release { label } } } }',
        { filter: { label } },
      );
      expect(data.runsConnection).toEqual({ totalCount: 1, nodes: [{ id: labelled.id, releaseLabel: label, configuration: { identifier: setup.configuration }, release: { label } }] });
    });
  });
});
