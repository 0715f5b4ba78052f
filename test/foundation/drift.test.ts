/**
 * Generated files must match the code: the migrations must create exactly
 * what the entities describe, on each dialect, and schema.graphql must be
 * what the resolvers build.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { printSchema } from 'graphql';
import { createDataSource } from '../../src/db/data-source';
import { pendingSchemaChanges } from '../../src/db/schema-diff';
import { buildAppSchema } from '../../src/graphql/schema';
import { createTestDatabase, testDialects } from '../support/databases';

describe.each(testDialects)('migrations on %s', (dialect) => {
  it('match the entities: no schema change is pending after applying them', async () => {
    const database = await createTestDatabase(dialect);
    const { dataSource } = await createDataSource({ database: database.config, schemaMode: 'own' });
    try {
      const applied = await dataSource.runMigrations({ transaction: 'each' });
      expect(applied.length).toBeGreaterThan(0);
      const diff = await pendingSchemaChanges(dataSource);
      expect(diff.up.map((statement) => statement.query)).toEqual([]);
    } finally {
      await dataSource.destroy();
      await database.drop();
    }
  });

  it('in shared mode create only the service\'s own tables', async () => {
    const database = await createTestDatabase(dialect);
    const { dataSource } = await createDataSource({ database: database.config, schemaMode: 'shared' });
    try {
      await dataSource.runMigrations({ transaction: 'each' });
      const tables = (
        (await database.query(
          dialect === 'mysql' ? 'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE()' : "SELECT name FROM sqlite_master WHERE type = 'table'",
        )) as { name: string }[]
      ).map((row) => row.name);
      expect(tables.filter((name) => name.startsWith('tx_nrllm_'))).toEqual([]);
      expect(tables).toEqual(expect.arrayContaining(['promptwire_api_token', 'promptwire_model_price', 'promptwire_run_lease']));
    } finally {
      await dataSource.destroy();
      await database.drop();
    }
  });
});

describe('schema.graphql', () => {
  it('is what the resolvers build (run `npm run schema:emit` after changing the API)', async () => {
    const committed = fs.readFileSync(path.resolve(__dirname, '../../schema.graphql'), 'utf8');
    expect(committed).toBe(`${printSchema(await buildAppSchema())}\n`);
  });
});

describe('the typed client documents (src/client/generated)', () => {
  it('are what GraphQL Code Generator makes of schema.graphql and src/client/operations (run `npm run client:generate`)', () => {
    const root = path.resolve(__dirname, '../..');
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-codegen-'));
    try {
      const output = path.join(directory, 'graphql.ts');
      execFileSync(process.execPath, [path.join(root, 'node_modules/@graphql-codegen/cli/cjs/bin.js'), '--config', 'codegen.ts', '--silent'], {
        cwd: root,
        env: { ...process.env, CLIENT_CODEGEN_OUTPUT: output },
        stdio: 'pipe',
      });
      expect(fs.readFileSync(path.join(root, 'src/client/generated/graphql.ts'), 'utf8')).toBe(fs.readFileSync(output, 'utf8'));
    } finally {
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});
