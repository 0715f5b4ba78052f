import type { DataSource } from 'typeorm';

export interface SchemaStatement {
  query: string;
  parameters?: unknown[];
}

export interface SchemaDiff {
  up: SchemaStatement[];
  down: SchemaStatement[];
}

/** What TypeORM would change to make the connected database match the entities. Empty = no drift. */
export async function pendingSchemaChanges(dataSource: DataSource): Promise<SchemaDiff> {
  const log = await dataSource.driver.createSchemaBuilder().log();
  return {
    up: log.upQueries.map((q) => ({ query: q.query, parameters: q.parameters })),
    down: log.downQueries.map((q) => ({ query: q.query, parameters: q.parameters })),
  };
}

/** Tables of the service's own (`promptwire_`) group; everything else belongs to TYPO3's group. */
export function isOwnTableStatement(statement: SchemaStatement): boolean {
  return /promptwire_/.test(statement.query) && !/tx_nrllm_/.test(statement.query);
}
