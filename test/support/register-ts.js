/**
 * Lets a child `node` process load the TypeScript sources directly, compiled
 * by swc with the same settings as the test runner (decorator metadata
 * included), so that multi-process tests run the real `src/main.ts`.
 * Usage: node -r ./test/support/register-ts.js src/main.ts
 */
const fs = require('node:fs');
const { transformSync } = require('@swc/core');
const [, swcOptions] = require('../../jest.config.js').transform['^.+\\.ts$'];

require.extensions['.ts'] = (module, filename) => {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), { ...swcOptions, filename, sourceMaps: 'inline' });
  module._compile(code, filename);
};
require('reflect-metadata');
