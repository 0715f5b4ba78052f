/**
 * The request span's error rules (one pure function): the GraphQL error code
 * of a resolved operation is the error type, else a 5xx status; only a 5xx or
 * an INTERNAL_SERVER_ERROR is the server's error.
 */
import { requestSpanOutcome, tracesOperation } from '../../src/operations/tracing';

describe('requestSpanOutcome', () => {
  test.each([
    [200, null, { errorType: null, error: false }],
    [400, null, { errorType: null, error: false }],
    [404, null, { errorType: null, error: false }],
    [500, null, { errorType: '500', error: true }],
    [503, null, { errorType: '503', error: true }],
    [200, 'BAD_USER_INPUT', { errorType: 'BAD_USER_INPUT', error: false }],
    [429, 'TOO_MANY_REQUESTS', { errorType: 'TOO_MANY_REQUESTS', error: false }],
    [200, 'INTERNAL_SERVER_ERROR', { errorType: 'INTERNAL_SERVER_ERROR', error: true }],
    [500, 'INTERNAL_SERVER_ERROR', { errorType: 'INTERNAL_SERVER_ERROR', error: true }],
    [502, 'BAD_USER_INPUT', { errorType: 'BAD_USER_INPUT', error: true }],
  ] as const)('HTTP %i with GraphQL code %s', (status, code, expected) => {
    expect(requestSpanOutcome(status, code)).toEqual(expected);
  });
});

/** Which resolved operations get a request span (TRACE_QUERIES); one pure function. */
describe('tracesOperation', () => {
  test.each([
    ['mutation', 'parent', false, true],
    ['mutation', 'none', false, true],
    ['subscription', 'none', false, true],
    ['query', 'parent', true, true],
    ['query', 'parent', false, false],
    ['query', 'all', false, true],
    ['query', 'none', true, false],
  ] as const)('a %s with TRACE_QUERIES=%s, client traces: %s → %s', (type, policy, clientTraces, expected) => {
    expect(tracesOperation(type, policy, clientTraces)).toBe(expected);
  });
});
