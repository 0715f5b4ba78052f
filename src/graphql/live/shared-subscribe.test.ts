import { EventEmitter, on } from 'node:events';
import { compileQuery } from 'graphql-jit';
import { execute, GraphQLError, GraphQLInt, type GraphQLFieldConfigMap, GraphQLNonNull, GraphQLObjectType, GraphQLSchema, GraphQLString, parse, type ExecutionResult } from 'graphql';
import { COMPILE_AFTER_EVENTS } from './event-executor';
import { isPreSerialized, PreSerializedMarkers } from './pre-serialized';
import { createSharedSubscribe as createSharedSubscribeWith } from './shared-subscribe';

// What serveSubscriptions creates once per server: the markers its results are serialised with.
const markers = new PreSerializedMarkers();
const createSharedSubscribe = (...[options, targetOf]: [Parameters<typeof createSharedSubscribeWith>[0], Parameters<typeof createSharedSubscribeWith>[2]?]) =>
  createSharedSubscribeWith(options, markers, targetOf);
const expandPreSerialized = (message: string) => markers.expand(message);

// The real compiler, counted.
jest.mock('graphql-jit', () => {
  const actual = jest.requireActual<typeof import('graphql-jit')>('graphql-jit');
  return { ...actual, compileQuery: jest.fn(actual.compileQuery) };
});

interface Tick {
  n: number;
  label: string;
}

function fixture() {
  const bus = new EventEmitter();
  let resolved = 0;
  let sourcesOpen = 0;
  const Tick = new GraphQLObjectType({
    name: 'Tick',
    fields: {
      n: {
        type: GraphQLInt,
        resolve: (tick: Tick) => {
          resolved += 1;
          return tick.n;
        },
      },
      label: { type: GraphQLString },
      viewer: { type: GraphQLString, resolve: (_tick: Tick, _args: unknown, context: { role: string }) => context.role },
    },
  });
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: { ok: { type: GraphQLInt } } }),
    subscription: new GraphQLObjectType({
      name: 'Subscription',
      fields: {
        live: {
          type: Tick,
          // An event stream that ends a pending next() when returned (unlike an async generator).
          subscribe: () => {
            const events = on(bus, 'tick');
            sourcesOpen += 1;
            return {
              next: () => events.next(),
              return: () => {
                sourcesOpen -= 1;
                return events.return ? events.return() : Promise.resolve({ value: undefined, done: true });
              },
              [Symbol.asyncIterator]() {
                return this;
              },
            };
          },
          resolve: (event: unknown) => (event as [Tick])[0],
        },
        ticks: {
          type: Tick,
          subscribe: async function* () {
            sourcesOpen += 1;
            try {
              for await (const [tick] of on(bus, 'tick')) yield tick as Tick;
            } finally {
              sourcesOpen -= 1;
            }
          },
          resolve: (tick: unknown) => tick,
        },
      },
    }),
  });
  return { bus, schema, resolved: () => resolved, sourcesOpen: () => sourcesOpen };
}

const subscribeShared = createSharedSubscribe({ contextKey: (context) => (context as { role: string }).role, finish: (result) => result });

async function open(schema: GraphQLSchema, query: string, role = 'VIEWER', variableValues?: Record<string, unknown>) {
  const result = await subscribeShared({ schema, document: parse(query), contextValue: { role }, variableValues });
  if (!(Symbol.asyncIterator in result)) throw new Error('expected a stream');
  return (result as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]();
}

const asJson = (value: unknown) => JSON.parse(expandPreSerialized(JSON.stringify({ payload: value }))) as { payload: unknown };

describe('createSharedSubscribe', () => {
  it('executes an event once for identical subscriptions, and once more for a different document or role', async () => {
    const { bus, schema, resolved } = fixture();
    const same = await Promise.all(Array.from({ length: 50 }, () => open(schema, 'subscription { ticks { n label } }')));
    const other = await open(schema, 'subscription { ticks { value: n } }');
    const admin = await open(schema, 'subscription { ticks { n label } }', 'ADMIN');
    const pending = [...same, other, admin].map((iterator) => iterator.next());
    await new Promise((resolve) => setImmediate(resolve));
    bus.emit('tick', { n: 7, label: 'seven' });
    const results = await Promise.all(pending);
    expect(resolved()).toBe(3);
    for (const result of results.slice(0, 50)) expect(asJson(result.value).payload).toEqual({ data: { ticks: { n: 7, label: 'seven' } } });
    expect(asJson(results[50]!.value).payload).toEqual({ data: { ticks: { value: 7 } } });
    expect(asJson(results[51]!.value).payload).toEqual({ data: { ticks: { n: 7, label: 'seven' } } });
    expect(isPreSerialized(results[0]!.value)).toBe(true);
    expect((results[0]!.value as ExecutionResult).data).toEqual({ ticks: { n: 7, label: 'seven' } });
  });

  it('keeps results apart when the variables differ', async () => {
    const { bus, schema } = fixture();
    const doc = 'subscription($withLabel: Boolean!) { ticks { n label @include(if: $withLabel) } }';
    const withLabel = await open(schema, doc, 'VIEWER', { withLabel: true });
    const without = await open(schema, doc, 'VIEWER', { withLabel: false });
    const pending = [withLabel.next(), without.next()];
    await new Promise((resolve) => setImmediate(resolve));
    bus.emit('tick', { n: 1, label: 'one' });
    const [a, b] = await Promise.all(pending);
    expect(asJson(a!.value).payload).toEqual({ data: { ticks: { n: 1, label: 'one' } } });
    expect(asJson(b!.value).payload).toEqual({ data: { ticks: { n: 1 } } });
  });

  it('executes separately for events that are distinct objects', async () => {
    const { bus, schema, resolved } = fixture();
    const iterators = await Promise.all([open(schema, 'subscription { ticks { n } }'), open(schema, 'subscription { ticks { n } }')]);
    const first = iterators.map((iterator) => iterator.next());
    await new Promise((resolve) => setImmediate(resolve));
    bus.emit('tick', { n: 1, label: 'a' });
    await Promise.all(first);
    const second = iterators.map((iterator) => iterator.next());
    bus.emit('tick', { n: 2, label: 'b' });
    const results = await Promise.all(second);
    expect(results.map((result) => asJson(result.value).payload)).toEqual([{ data: { ticks: { n: 2 } } }, { data: { ticks: { n: 2 } } }]);
    expect(resolved()).toBe(2);
  });

  it('hands return() to the source at once, even while waiting for an event', async () => {
    const { schema, sourcesOpen } = fixture();
    const iterator = await open(schema, 'subscription { live { n } }');
    const waiting = iterator.next();
    await new Promise((resolve) => setImmediate(resolve));
    expect(sourcesOpen()).toBe(1);
    await iterator.return?.();
    expect(sourcesOpen()).toBe(0);
    await expect(waiting).resolves.toEqual({ value: undefined, done: true });
  });

  it('sends the refusal instead of a shared result whose JSON is refused, once for all', async () => {
    const { bus, schema } = fixture();
    let checked = 0;
    const refusing = createSharedSubscribe({
      contextKey: () => null,
      finish: (result) => result,
      refuse: (json) => ((checked += 1), json.length > 40 ? { data: null, errors: [new GraphQLError('too large')] } : null),
    });
    const iterators = await Promise.all(
      [0, 1].map(async () => ((await refusing({ schema, document: parse('subscription { ticks { n label } }'), contextValue: {} })) as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]()),
    );
    const pending = iterators.map((iterator) => iterator.next());
    await new Promise((resolve) => setImmediate(resolve));
    bus.emit('tick', { n: 1, label: 'a label long enough to be refused' });
    const results = await Promise.all(pending);
    for (const result of results) expect(asJson(result.value).payload).toEqual({ data: null, errors: [{ message: 'too large' }] });
    expect(checked).toBe(1);
  });

  it('passes errors of the subscribe step through as a result', async () => {
    const { schema } = fixture();
    const result = await subscribeShared({ schema, document: parse('subscription { nope }'), contextValue: { role: 'VIEWER' } });
    expect('errors' in result && result.errors?.length).toBeTruthy();
  });

  it('compiles an operation once, after COMPILE_AFTER_EVENTS events, for every subscription of the same text', async () => {
    const { bus, schema } = fixture();
    const compiles = jest.mocked(compileQuery);
    compiles.mockClear();
    try {
      const query = 'subscription Counted { ticks { n } }';
      const first = await open(schema, query);
      for (let n = 1; n <= COMPILE_AFTER_EVENTS; n += 1) {
        const next = first.next();
        await new Promise((resolve) => setImmediate(resolve));
        bus.emit('tick', { n, label: 'x' });
        await next;
      }
      expect(compiles).not.toHaveBeenCalled();
      const second = await open(schema, query);
      const pending = [first.next(), second.next()];
      await new Promise((resolve) => setImmediate(resolve));
      bus.emit('tick', { n: 99, label: 'x' });
      const results = await Promise.all(pending);
      expect(results.map((result) => asJson(result.value).payload)).toEqual([{ data: { ticks: { n: 99 } } }, { data: { ticks: { n: 99 } } }]);
      expect(compiles).toHaveBeenCalledTimes(1);
    } finally {
      compiles.mockClear();
    }
  });

  it('gives every event the result graphql-js gives it: data, variables, aliases and errors with their path', async () => {
    const { bus, schema } = fixture();
    const failing = new GraphQLSchema({
      query: schema.getQueryType(),
      subscription: new GraphQLObjectType({
        name: 'Subscription',
        fields: {
          ticks: {
            type: new GraphQLObjectType({
              name: 'FailingTick',
              fields: {
                n: { type: GraphQLInt, args: { note: { type: GraphQLString } } },
                label: { type: GraphQLString, resolve: (tick: Tick) => (tick.label === 'bad' ? Promise.reject(new GraphQLError('no label')) : tick.label) },
                broken: { type: new GraphQLNonNull(GraphQLString), resolve: () => null },
              },
            }),
            subscribe: async function* () {
              for await (const [tick] of on(bus, 'tick')) yield tick as Tick;
            },
            resolve: (tick: unknown) => tick,
          },
        },
      }),
    });
    const documents: [GraphQLSchema, string, Record<string, unknown> | undefined][] = [
      [schema, 'subscription($withLabel: Boolean!) { ticks { count: n label @include(if: $withLabel) viewer } }', { withLabel: true }],
      [failing, 'subscription { ticks { n label } }', undefined],
      [failing, 'subscription { ticks { n broken } }', undefined],
      // Compiled to JavaScript: literals that would break out of generated code stay literals.
      [failing, 'subscription { ticks { n(note: "x\\"); process.exit(7); (\\"") a: n(note: "`${process.exit(8)}`") label } }', undefined],
    ];
    const iterators = await Promise.all(documents.map(([target, query, variables]) => subscribeShared({ schema: target, document: parse(query), contextValue: { role: 'EDITOR' }, variableValues: variables })));
    // Executed by graphql-js first, then compiled: every event is compared, on both sides of the switch.
    const ticks = Array.from({ length: COMPILE_AFTER_EVENTS + 3 }, (_tick, index) => ({ n: index, label: index % 2 === 0 ? 'one' : 'bad' }));
    for (const tick of ticks) {
      const pending = iterators.map((result) => (result as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]().next());
      await new Promise((resolve) => setImmediate(resolve));
      bus.emit('tick', tick);
      const results = await Promise.all(pending);
      for (const [index, [target, query, variables]] of documents.entries()) {
        const expected = await execute({ schema: target, document: parse(query), rootValue: tick, contextValue: { role: 'EDITOR' }, variableValues: variables });
        expect(asJson(results[index]!.value).payload).toEqual(JSON.parse(JSON.stringify(expected)));
      }
    }
  });
});

describe('createSharedSubscribe with a live trace (direct delivery)', () => {
  /** A source like run-reader's live trace: events pushed by the test go to the deliverer, or else to next(). */
  function liveSource() {
    let deliver: ((event: unknown) => boolean) | null = null;
    const queued: unknown[] = [];
    let wake: (() => void) | null = null;
    let ended = false;
    const source = {
      deliverLive: (take: (event: unknown) => boolean) => void (deliver = take),
      next: async (): Promise<IteratorResult<unknown>> => {
        while (queued.length === 0 && !ended) await new Promise<void>((resolve) => (wake = resolve));
        return queued.length > 0 ? { value: queued.shift(), done: false } : { value: undefined, done: true };
      },
      return: async () => ({ value: undefined, done: true as const }),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
    const publish = (event: unknown) => {
      if (deliver?.(event)) return 'direct';
      queued.push(event);
      wake?.();
      return 'queued';
    };
    const end = () => {
      ended = true;
      wake?.();
    };
    return { source, publish, end };
  }

  /** A schema over a Step with `n` and an asynchronously resolved `slow`, whose subscription takes `source`. */
  function schemaOver(source: object) {
    return schemaOverEach([{ source }], { n: { type: GraphQLInt }, slow: { type: GraphQLInt, resolve: async (step: { n: number }) => step.n } });
  }

  /** A schema whose subscriptions take the sources one after the other, over a Step with these fields. */
  function schemaOverEach(sources: readonly { source: object }[], fields: GraphQLFieldConfigMap<{ n: number }, unknown>) {
    let opened = 0;
    return new GraphQLSchema({
      query: new GraphQLObjectType({ name: 'Query', fields: { ok: { type: GraphQLInt } } }),
      subscription: new GraphQLObjectType({
        name: 'Subscription',
        fields: {
          live: {
            type: new GraphQLObjectType({ name: 'Step', fields }),
            subscribe: () => sources[opened++]!.source,
            resolve: (event: unknown) => event,
          },
        },
      }),
    });
  }

  it('writes live events through the target in order, also when their results are built asynchronously; a refused one follows through the iterator', async () => {
    const { source, publish } = liveSource();
    const written: string[] = [];
    let accepting = true;
    const target = { accepts: () => accepting, write: (payload: { json: string }) => written.push(payload.json), fail: (error: unknown) => { throw error; } };
    const subscribe = createSharedSubscribe({ contextKey: () => null, finish: (result) => result }, () => target);
    const args = { schema: schemaOver(source), document: parse('subscription { live { n slow } }'), contextValue: {} };
    const iterator = ((await subscribe(args)) as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]();
    expect(publish({ n: 1 })).toBe('direct');
    expect(publish({ n: 2 })).toBe('direct');
    // Built asynchronously (the `slow` resolver): nothing is written before the results are.
    expect(written).toEqual([]);
    accepting = false;
    expect(publish({ n: 3 })).toBe('queued');
    const third = await iterator.next();
    expect(written.map((json) => JSON.parse(json) as unknown)).toEqual([{ data: { live: { n: 1, slow: 1 } } }, { data: { live: { n: 2, slow: 2 } } }]);
    expect(asJson(third.value).payload).toEqual({ data: { live: { n: 3, slow: 3 } } });
  });

  it('ends (graphql-ws then sends complete) only after the steps taken directly are written', async () => {
    const { source, publish, end } = liveSource();
    const written: string[] = [];
    const target = { accepts: () => true, write: (payload: { json: string }) => written.push(payload.json), fail: (error: unknown) => { throw error; } };
    const subscribe = createSharedSubscribe({ contextKey: () => null, finish: (result) => result }, () => target);
    const iterator = ((await subscribe({ schema: schemaOver(source), document: parse('subscription { live { slow } }'), contextValue: {} })) as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]();
    const waiting = iterator.next();
    expect(publish({ n: 9 })).toBe('direct');
    end();
    await expect(waiting).resolves.toEqual({ value: undefined, done: true });
    expect(written).toEqual(['{"data":{"live":{"slow":9}}}']);
  });

  it('builds each event once for every identical subscription, and writes it to all of them', async () => {
    const sources = [liveSource(), liveSource(), liveSource()];
    const written: string[][] = [[], [], []];
    const targets = written.map((list) => ({ accepts: () => true, write: (payload: { json: string }) => list.push(payload.json), fail: () => undefined }));
    let resolved = 0;
    const schema = schemaOverEach(sources, { n: { type: GraphQLInt, resolve: (step: { n: number }) => ((resolved += 1), step.n) } });
    const argsList = targets.map(() => ({ schema, document: parse('subscription { live { n } }'), contextValue: {} }));
    const byArgs = new Map<object, (typeof targets)[number]>(argsList.map((args, index) => [args, targets[index]!]));
    const subscribe = createSharedSubscribe({ contextKey: () => null, finish: (result) => result }, (args) => byArgs.get(args) ?? null);
    for (const args of argsList) await subscribe(args);
    // One event object reaches every watcher, as the trace bus hands it out.
    const event = { n: 5 };
    expect(sources.map(({ publish }) => publish(event))).toEqual(['direct', 'direct', 'direct']);
    expect(written).toEqual([['{"data":{"live":{"n":5}}}'], ['{"data":{"live":{"n":5}}}'], ['{"data":{"live":{"n":5}}}']]);
    expect(resolved).toBe(1);
  });

  it('tells the target how many subscriptions of the group take live steps: its audience, until each one ends', async () => {
    const sources = [liveSource(), liveSource(), liveSource()];
    const audiences: number[][] = [[], [], []];
    const targets = audiences.map((list) => ({ accepts: () => true, write: (_payload: unknown, audience: number) => list.push(audience), fail: () => undefined }));
    const schema = schemaOverEach(sources, { n: { type: GraphQLInt } });
    // Two identical subscriptions (one group) and one with another document (a group of its own).
    const documents = ['subscription { live { n } }', 'subscription { live { n } }', 'subscription Other { live { n } }'];
    const argsList = documents.map((text) => ({ schema, document: parse(text), contextValue: {} }));
    const byArgs = new Map<object, (typeof targets)[number]>(argsList.map((args, index) => [args, targets[index]!]));
    const subscribe = createSharedSubscribe({ contextKey: () => null, finish: (result) => result }, (args) => byArgs.get(args) ?? null);
    const iterators: AsyncIterator<ExecutionResult>[] = [];
    for (const args of argsList) iterators.push(((await subscribe(args)) as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]());
    const first = { n: 1 };
    for (const { publish } of sources) publish(first);
    expect(audiences).toEqual([[2], [2], [1]]);
    // The first subscription is completed (graphql-ws calls return()); its group is one smaller.
    await iterators[0]!.return!();
    const second = { n: 2 };
    for (const { publish } of sources.slice(1)) publish(second);
    expect(audiences).toEqual([[2], [2, 1], [1, 1]]);
    // A source that ends leaves its group as well; a new subscription of that text starts a group of one.
    sources[1]!.end();
    await expect(iterators[1]!.next()).resolves.toEqual({ value: undefined, done: true });
    const again = liveSource();
    sources.push(again);
    const latest: number[] = [];
    const args = { schema, document: parse(documents[0]!), contextValue: {} };
    byArgs.set(args, { accepts: () => true, write: (_payload: unknown, audience: number) => latest.push(audience), fail: () => undefined });
    await subscribe(args);
    again.publish({ n: 3 });
    expect(latest).toEqual([1]);
  });
});
