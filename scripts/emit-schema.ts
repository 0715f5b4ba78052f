/**
 * Writes schema.graphql from the resolver classes. A test fails when the
 * committed file differs from what the code builds.
 */
import 'reflect-metadata';
import fs from 'node:fs';
import path from 'node:path';
import { printSchema } from 'graphql';
import { buildAppSchema } from '../src/graphql/schema';

export async function renderSchema(): Promise<string> {
  return `${printSchema(await buildAppSchema())}\n`;
}

if (require.main === module) {
  renderSchema()
    .then((text) => {
      fs.writeFileSync(path.resolve(__dirname, '..', '..', 'schema.graphql'), text);
      console.log('wrote schema.graphql');
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
