/**
 * The own-mode migrations create nr_llm's tables exactly as its
 * ext_tables.sql does (columns, types with their display widths, signedness,
 * nullability, defaults, indexes), so a TYPO3 site's schema analyser finds
 * nothing to change on a database this service created, and the service finds
 * nothing to change on one TYPO3 created.
 */
import { createDataSource } from '../../src/db/data-source';
import { pendingSchemaChanges } from '../../src/db/schema-diff';
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { createTypo3Tables, NR_LLM_TABLES } from '../support/typo3-schema';

type Row = Record<string, unknown>;

async function describeMysqlTable(database: TestDatabase, table: string): Promise<{ columns: Row[]; indexes: Row[]; collation: unknown }> {
  const columns = (await database.query(
    `SELECT COLUMN_NAME AS name, COLUMN_TYPE AS type, IS_NULLABLE AS nullable, COLUMN_DEFAULT AS \`default\`, EXTRA AS extra
       FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY COLUMN_NAME`,
    [table],
  )) as Row[];
  const indexes = (await database.query(
    `SELECT INDEX_NAME AS name, SEQ_IN_INDEX AS position, COLUMN_NAME AS \`column\`, NON_UNIQUE AS nonUnique, SUB_PART AS prefix
       FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
    [table],
  )) as Row[];
  const [info] = (await database.query('SELECT TABLE_COLLATION AS collation FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?', [table])) as Row[];
  return { columns, indexes, collation: info?.collation };
}

/** SQLite keeps a declared type's affinity only; compare that, and everything else as declared. */
function affinity(type: string): string {
  const upper = type.toUpperCase();
  if (upper.includes('INT')) return 'INTEGER';
  if (/CHAR|CLOB|TEXT/.test(upper)) return 'TEXT';
  if (upper === '' || upper.includes('BLOB')) return 'BLOB';
  if (/REAL|FLOA|DOUB/.test(upper)) return 'REAL';
  return 'NUMERIC';
}

const sqliteDefault = (value: unknown): unknown => (value === null ? null : String(value).replace(/^\((.*)\)$/, '$1').replace(/^'(.*)'$/, '$1'));

async function describeSqliteTable(database: TestDatabase, table: string): Promise<{ columns: Row[]; indexes: Row[] }> {
  const columns = ((await database.query(`PRAGMA table_info(${table})`)) as Row[])
    .map((column) => ({ name: column.name, affinity: affinity(String(column.type)), notNull: column.notnull, default: sqliteDefault(column.dflt_value), primaryKey: column.pk }))
    .sort((a, b) => String(a.name).localeCompare(String(b.name)));
  const indexes: Row[] = [];
  for (const index of (await database.query(`PRAGMA index_list(${table})`)) as Row[]) {
    if (String(index.origin) !== 'c') continue; // the primary key's own index
    const parts = (await database.query(`PRAGMA index_info(${String(index.name)})`)) as Row[];
    indexes.push({ name: index.name, unique: index.unique, columns: parts.sort((a, b) => Number(a.seqno) - Number(b.seqno)).map((part) => part.name) });
  }
  return { columns, indexes: indexes.sort((a, b) => String(a.name).localeCompare(String(b.name))) };
}

describe.each(testDialects)('nr_llm\'s tables on %s', (dialect) => {
  let fromNrLlm: TestDatabase;
  let fromMigrations: TestDatabase;
  beforeAll(async () => {
    fromNrLlm = await createTestDatabase(dialect);
    await createTypo3Tables(fromNrLlm);
    fromMigrations = await createTestDatabase(dialect);
    const { dataSource } = await createDataSource({ database: fromMigrations.config, schemaMode: 'own' });
    try {
      await dataSource.runMigrations({ transaction: 'each' });
    } finally {
      await dataSource.destroy();
    }
  });
  afterAll(async () => {
    await fromNrLlm?.drop();
    await fromMigrations?.drop();
  });

  it.each(Object.keys(NR_LLM_TABLES))('the own-mode migrations create %s exactly as ext_tables.sql does', async (table) => {
    if (dialect === 'mysql') {
      expect(await describeMysqlTable(fromMigrations, table)).toEqual(await describeMysqlTable(fromNrLlm, table));
    } else {
      expect(await describeSqliteTable(fromMigrations, table)).toEqual(await describeSqliteTable(fromNrLlm, table));
    }
  });

  if (dialect === 'mysql') {
    it('on a database created from ext_tables.sql, the entities want no change to any tx_nrllm_* table', async () => {
      const { dataSource } = await createDataSource({ database: fromNrLlm.config, schemaMode: 'shared' });
      try {
        const diff = await pendingSchemaChanges(dataSource);
        expect(diff.up.map((statement) => statement.query).filter((query) => query.includes('tx_nrllm_'))).toEqual([]);
      } finally {
        await dataSource.destroy();
      }
    });
  }
});

describe.each(testDialects)('upgrading an own-mode database on %s to nr_llm\'s tables', (dialect) => {
  it('keeps every run, lower-cases its status, turns a NULL cost into 0 and keeps the skill relations', async () => {
    const database = await createTestDatabase(dialect);
    const { dataSource } = await createDataSource({ database: database.config, schemaMode: 'own' });
    try {
      const all = dataSource.migrations;
      const parity = all.findIndex((migration) => /^Typo3Parity/.test(migration.name ?? migration.constructor.name));
      expect(parity).toBeGreaterThan(0);
      // Apply what came before, write rows as the previous version did, then apply the rest.
      (dataSource as unknown as { migrations: unknown[] }).migrations = all.slice(0, parity);
      await dataSource.runMigrations({ transaction: 'each' });
      await database.query(
        "INSERT INTO tx_nrllm_agentrun (uuid, status, configuration_identifier, estimated_cost, termination_reason, tstamp, crdate) VALUES ('a', 'COMPLETED', 'conf', NULL, 'completed', 1, 1), ('b', 'RUNNING', 'conf', '0.125000', '', 1, 1)",
      );
      await database.query("INSERT INTO tx_nrllm_skill (identifier, name, body, tstamp, crdate) VALUES ('s', 'S', 'Body', 1, 1)");
      await database.query('INSERT INTO tx_nrllm_configuration_skill_mm (uid_local, uid_foreign, sorting) VALUES (1, 1, 1), (1, 2, 2)');
      (dataSource as unknown as { migrations: unknown[] }).migrations = all;
      await dataSource.runMigrations({ transaction: 'each' });
      const runs = ((await database.query('SELECT uuid, status, estimated_cost, configuration_identifier, claimed_by FROM tx_nrllm_agentrun ORDER BY uuid')) as Row[]).map((row) => ({ ...row, estimated_cost: Number(row.estimated_cost) }));
      expect(runs).toEqual([
        { uuid: 'a', status: 'completed', estimated_cost: 0, configuration_identifier: 'conf', claimed_by: '' },
        { uuid: 'b', status: 'running', estimated_cost: 0.125, configuration_identifier: 'conf', claimed_by: 'promptwire' },
      ]);
      expect(await database.query('SELECT identifier FROM tx_nrllm_skill')).toEqual([{ identifier: 's' }]);
      expect(await database.query('SELECT uid_local, uid_foreign, sorting FROM tx_nrllm_configuration_skill_mm ORDER BY sorting')).toEqual([
        { uid_local: 1, uid_foreign: 1, sorting: 1 },
        { uid_local: 1, uid_foreign: 2, sorting: 2 },
      ]);
    } finally {
      await dataSource.destroy();
      await database.drop();
    }
  });
});
