import 'reflect-metadata';
import { execute, getNullableType, isListType, isObjectType, parse, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { declaredRows } from './query-limits';
import { SubscriberLaggedError } from '../shared/errors';
import { buildAppSchema } from './schema';

/**
 * A subscription event's result is built synchronously for the run streams
 * (see SYNCHRONOUS_EVENT_RESOLVERS): the fan-out writes a live step inside the
 * bus's publish only when execute returns a result, not a promise.
 */
describe('run subscription events resolve synchronously', () => {
  let schema: GraphQLSchema;
  beforeAll(async () => {
    schema = await buildAppSchema();
  });

  const run = (document: string, rootValue: unknown) => execute({ schema, document: parse(document), rootValue, contextValue: {}, variableValues: { id: 'run-1' } });
  const trace = 'subscription ($id: ID!) { runTrace(runId: $id, afterSequence: 2) { sequence kind round durationMs content totalTokens } }';

  it('maps a stored step to its RunStep without a promise', () => {
    const result = run(trace, { sequence: 3, kind: 'llm', round: 1, durationMs: 12, content: 'Hello', totalTokens: 42 });
    expect(result).not.toBeInstanceOf(Promise);
    expect((result as ExecutionResult).data).toEqual({ runTrace: { sequence: 3, kind: 'LLM', round: 1, durationMs: 12, content: 'Hello', totalTokens: 42 } });
  });

  it('turns a lag into the SUBSCRIBER_LAGGED error, also without a promise', () => {
    const result = run(trace, new SubscriberLaggedError('Too far behind: resubscribe with afterSequence 7'));
    expect(result).not.toBeInstanceOf(Promise);
    const { data, errors } = result as ExecutionResult;
    expect(data).toBeNull();
    expect(errors?.[0]?.message).toBe('Too far behind: resubscribe with afterSequence 7');
    expect(errors?.[0]?.originalError).toBeInstanceOf(SubscriberLaggedError);
  });

  it('maps a delta without a promise', () => {
    const result = run('subscription ($id: ID!) { runDeltas(runId: $id) { kind text round offset } }', { kind: 'content', text: 'Hel', round: 1, offset: 0 });
    expect(result).not.toBeInstanceOf(Promise);
    expect((result as ExecutionResult).data).toEqual({ runDeltas: { kind: 'content', text: 'Hel', round: 1, offset: 0 } });
  });
});

/**
 * The cost of a document multiplies a list's selection by the rows the list
 * may return (query-limits.ts): every list of the API must say how many, by a
 * size argument or a declared bound, or it would be costed by a guess.
 */
describe('every list of the API is costed by a bound it states', () => {
  it('has a size argument (limit, first) or declares listRows', async () => {
    const schema = await buildAppSchema();
    const unbounded: string[] = [];
    for (const type of Object.values(schema.getTypeMap())) {
      if (type.name.startsWith('__') || !isObjectType(type)) continue;
      for (const field of Object.values(type.getFields())) {
        if (!isListType(getNullableType(field.type))) continue;
        const sized = field.args.some((arg) => arg.name === 'limit' || arg.name === 'first');
        const limitMeansAll = field.args.some((arg) => arg.name === 'limit' && arg.defaultValue === undefined);
        const connectionRows = field.extensions?.connectionRows === true;
        if (connectionRows || (sized && !limitMeansAll) || declaredRows(field) !== null) continue;
        unbounded.push(`${type.name}.${field.name}`);
      }
    }
    expect(unbounded).toEqual([]);
  });
});
