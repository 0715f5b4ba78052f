/**
 * The built-in tools of api.md ("Built-in tools"), all enabled by default.
 */

import { createCalculatorTool } from './calculator';
import { createGetSnippetTool, createSearchSnippetsTool, type SnippetSource } from './snippet-tools';
import { createToolRegistry, type ToolRegistration, type ToolRegistry } from './tool-registry';

/** `calculator`, `search_snippets` and `get_snippet`, in that order. */
export function createBuiltinTools(source: SnippetSource): ToolRegistration[] {
  return [createCalculatorTool(), createSearchSnippetsTool(source), createGetSnippetTool(source)];
}

/** A registry holding the built-in tools; register more with `registry.register`. */
export function createBuiltinToolRegistry(source: SnippetSource): ToolRegistry {
  return createToolRegistry(createBuiltinTools(source));
}
