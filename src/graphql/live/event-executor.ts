/**
 * How a subscription's events are executed: by graphql-js, and once an
 * operation has shown that it will pay, by its compiled form (graphql-jit,
 * compiled once per document and operation). graphql-js's `execute` coerces
 * the variables, collects the fields and builds a context again for every
 * event, some 25 µs against 7 µs, and with one watcher per run every
 * delivery pays it.
 */
import { type DocumentNode, execute, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';

export type Result = ExecutionResult | Promise<ExecutionResult>;

/**
 * Events of one operation executed by graphql-js before it is compiled. A
 * compilation costs 1–5 ms, a graphql-js execution some 25 µs: an operation
 * is compiled once it has shown that it will pay (a run's trace has dozens of
 * steps), so a client sending many different documents that each see a few
 * events does not make the server compile them all.
 */
export const COMPILE_AFTER_EVENTS = 16;

/** One operation (document and operation name): events executed so far, then its compiled form (null: graphql-js executes it). */
interface Operation {
  executed: number;
  compiled: CompiledQuery | null | undefined;
}

/**
 * Operations per schema and document (documents with the same text are one object, see document-cache), by
 * operation name: what the subscriptions of one createSharedSubscribe know of the operations they execute.
 */
export class Operations {
  private readonly operations = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, Map<string, Operation>>>();

  of(args: ExecutionArgs): Operation {
    let perDocument = this.operations.get(args.schema);
    if (!perDocument) this.operations.set(args.schema, (perDocument = new WeakMap()));
    let perName = perDocument.get(args.document);
    if (!perName) perDocument.set(args.document, (perName = new Map()));
    const name = args.operationName ?? '';
    let operation = perName.get(name);
    if (!operation) perName.set(name, (operation = { executed: 0, compiled: undefined }));
    return operation;
  }
}

function compile(args: ExecutionArgs): CompiledQuery | null {
  try {
    const built = compileQuery(args.schema, args.document, args.operationName ?? undefined);
    return isCompiledQuery(built) ? built : null;
  } catch {
    return null;
  }
}

const NO_VARIABLES: Record<string, unknown> = Object.freeze({});

/**
 * How one subscription's events are executed: by the operation compiled with
 * graphql-jit (the same resolvers, scalars and errors) once it has had
 * COMPILE_AFTER_EVENTS events and compiles, else by graphql-js. Custom field
 * or type resolvers in the arguments: graphql-js.
 */
export class EventExecutor {
  /** Null: graphql-js executes every event. */
  private readonly operation: Operation | null;

  constructor(
    private readonly args: ExecutionArgs,
    operations: Operations,
  ) {
    this.operation = args.fieldResolver || args.typeResolver || args.subscribeFieldResolver ? null : operations.of(args);
  }

  run(event: unknown): Result {
    const operation = this.operation;
    if (operation) {
      if (operation.compiled === undefined) {
        operation.executed += 1;
        if (operation.executed > COMPILE_AFTER_EVENTS) operation.compiled = compile(this.args);
      }
      if (operation.compiled) return operation.compiled.query(event, this.args.contextValue, this.args.variableValues ?? NO_VARIABLES) as Result;
    }
    return execute({ ...this.args, rootValue: event }) as Result;
  }
}
