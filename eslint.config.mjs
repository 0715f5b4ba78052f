import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Features with a front door (their index.ts): the rest of src/ imports them
 * through it only. Two lists register classes directly and are the
 * exception: the DataSource's entities (src/db/entities.ts) and the schema's
 * resolvers (src/graphql/schema.ts, whose printed order follows the order its
 * resolver modules load in).
 */
const FEATURES = ['runs', 'mcp', 'webhooks', 'tasks', 'usage', 'conversations'];

function featureBoundaries(feature) {
  return {
    regex: `(^|/)${feature}/(?!index$)(?!.*\\.(entity|resolver)$)`,
    message: `Import the ${feature} feature from its index.ts ('…/${feature}'), not its internals; export what you need there.`,
  };
}

/** One block per feature (its own files may import its internals) and one for the rest of src/. */
const boundaryBlocks = [
  ...FEATURES.map((feature) => ({
    files: [`src/${feature}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { patterns: FEATURES.filter((other) => other !== feature).map(featureBoundaries) }] },
  })),
  {
    files: ['src/**/*.ts'],
    ignores: FEATURES.map((feature) => `src/${feature}/**`),
    rules: { 'no-restricted-imports': ['error', { patterns: FEATURES.map(featureBoundaries) }] },
  },
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'src/db/migrations/**', 'src/client/generated/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
      '@typescript-eslint/no-unsafe-function-type': 'off',
    },
  },
  {
    files: ['**/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly', __dirname: 'readonly' } },
    // CommonJS files load modules with require(); that is their import.
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  ...boundaryBlocks,
  {
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
