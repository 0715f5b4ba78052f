/**
 * The prompt rules, in one place, as pure functions over plain records (no
 * database, no service): what the API, runs, releases and impact previews
 * compose with.
 *
 * - tags.ts — tag parsing, normalisation, validation, vocabulary (PHP order);
 * - list-order.ts — the order snippets are listed and selected in (the
 *   database collation's);
 * - snippet-index.ts — one request's active snippets by tag;
 * - effective-prompt.ts — the selection by tags, the snippet block and its
 *   append to the system prompt; composition.ts — the same with provenance
 *   (which tags selected a part, which snippets were dropped and why);
 * - snippet-text.ts — one snippet's text in the block;
 * - call-options.ts — a model call's options as nr_llm builds them;
 * - configuration-prompt.ts — a configuration's effective prompt, selected
 *   snippets and call options from the above;
 * - run-messages.ts — a run's messages, assembled once before its first call;
 * - skill-block.ts — the skill block and its checksum rule;
 * - snippet-metadata.ts — snippet metadata as nr_llm reads and writes it.
 */
export * from './call-options';
export * from './composition';
export * from './configuration-prompt';
export * from './effective-prompt';
export * from './list-order';
export * from './run-messages';
export * from './skill-block';
export * from './snippet-index';
export * from './snippet-metadata';
export * from './snippet-text';
export * from './tags';
