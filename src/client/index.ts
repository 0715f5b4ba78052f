/**
 * `promptwire/client`: what a front end needs to talk to the service.
 *
 * - `watchRun`: a run's steps as an async iterable with gap-free resume.
 * - Typed documents (`RunDocument`, `StartRunDocument`, …) and their result
 *   and variable types, generated from schema.graphql; each document's
 *   `toString()` is the GraphQL text to send.
 */
export { toHttpUrl, toWebSocketUrl, watchRun, WatchRunError, type RunStep, type RunStepSummary, type WatchRunOptions } from './watch-run';
export * from './generated/graphql';
