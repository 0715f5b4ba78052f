/**
 * `promptwire/client`: what a front end needs to talk to the service.
 *
 * - `watchRun`: a run's steps as an async iterable with gap-free resume.
 * - `watchConversation`: a conversation's stored messages, each once and in
 *   order, and its state, as they change.
 * - Typed documents (`RunDocument`, `StartRunDocument`, …) and their result
 *   and variable types, generated from schema.graphql; each document's
 *   `toString()` is the GraphQL text to send.
 */
export { toHttpUrl, toWebSocketUrl, watchRun, WatchRunError, type RunStep, type RunStepSummary, type WatchRunOptions } from './watch-run';
export { watchConversation, WatchConversationError, type ConversationEvent, type ConversationMessage, type ConversationState, type WatchConversationOptions } from './watch-conversation';
export * from './generated/graphql';
