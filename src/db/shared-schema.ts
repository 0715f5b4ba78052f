import type { DataSource } from 'typeorm';
import { typo3Entities } from './entities';

/**
 * With SCHEMA_MODE=shared, TYPO3 owns the `tx_nrllm_*` tables. The service
 * never changes them, but it refuses to start when a column it uses is
 * missing, naming every one at once.
 */
export async function checkSharedSchema(dataSource: DataSource): Promise<void> {
  const runner = dataSource.createQueryRunner();
  try {
    const missing: string[] = [];
    for (const entity of typo3Entities) {
      const metadata = dataSource.getMetadata(entity);
      const table = await runner.getTable(metadata.tableName);
      if (!table) {
        missing.push(`${metadata.tableName} (the whole table)`);
        continue;
      }
      const present = new Set(table.columns.map((column) => column.name.toLowerCase()));
      for (const column of metadata.columns) {
        if (!present.has(column.databaseName.toLowerCase())) missing.push(`${metadata.tableName}.${column.databaseName}`);
      }
    }
    if (missing.length > 0) {
      throw new Error(
        `SCHEMA_MODE=shared, but the database lacks columns this service uses:\n  - ${missing.join('\n  - ')}\nUpdate the TYPO3 extension nr_llm and run its database analyser, or use SCHEMA_MODE=own on a database of its own.`,
      );
    }
  } finally {
    await runner.release();
  }
}
