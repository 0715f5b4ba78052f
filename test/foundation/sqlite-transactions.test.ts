import { createDataSource } from '../../src/db/data-source';
import { PromptSnippetEntity } from '../../src/snippets/snippet.entity';
import { createTestDatabase } from '../support/databases';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('transactions on the embedded SQLite database', () => {
  it('a transaction that fails does not take a concurrent, committed one down with it', async () => {
    const database = await createTestDatabase('sqlite');
    const { dataSource } = await createDataSource({ database: database.config, schemaMode: 'own' });
    try {
      await dataSource.runMigrations();
      const row = (identifier: string) => ({ identifier, name: identifier, snippet: 'text', tags: '', pid: 0, tstamp: 0, crdate: 0 });
      const committed = dataSource.transaction(async (manager) => {
        await manager.insert(PromptSnippetEntity, row('committed'));
        await pause(20);
      });
      const failing = dataSource.transaction(async (manager) => {
        await manager.insert(PromptSnippetEntity, row('failing'));
        await pause(60);
        throw new Error('refused');
      });
      await committed;
      await expect(failing).rejects.toThrow('refused');
      const identifiers = (await dataSource.getRepository(PromptSnippetEntity).find()).map((r) => r.identifier);
      expect(identifiers).toEqual(['committed']);
    } finally {
      await dataSource.destroy();
      await database.drop();
    }
  });
});
