/**
 * /playground: GraphiQL on this server. Queries and mutations over HTTP,
 * subscriptions over graphql-ws at /graphql, both with the console's token.
 * The editor's workers are bundled (no CDN).
 */
import 'graphiql/setup-workers/vite';
import 'graphiql/style.css';
import { createGraphiQLFetcher, type Fetcher } from '@graphiql/toolkit';
import { useGraphiQL, useGraphiQLActions, type GraphiQLPlugin } from '@graphiql/react';
import { GraphiQL } from 'graphiql';
import { type DocumentNode, Kind, parse } from 'graphql';
import { createClient } from 'graphql-ws';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { GRAPHQL_PATH, readToken, webSocketUrl } from '../shared/session';
import { SignInGate } from '../shared/sign-in';
import { EXAMPLES, type ExampleOperation } from './examples';
import './playground.css';

function ExamplesPanel() {
  const { addTab } = useGraphiQLActions();
  const queryEditor = useGraphiQL((state) => state.queryEditor);
  const variableEditor = useGraphiQL((state) => state.variableEditor);
  const open = (example: ExampleOperation) => {
    addTab();
    // The new tab is active once React has rendered it; then the editors show its content.
    setTimeout(() => {
      queryEditor?.setValue(example.query);
      variableEditor?.setValue(example.variables ?? '');
    }, 0);
  };
  return (
    <div className="examples" data-examples>
      <div className="graphiql-doc-explorer-title">Examples</div>
      <p>Run these one after the other. Each opens in a new tab.</p>
      <ol>
        {EXAMPLES.map((example) => (
          <li key={example.title}>
            <button type="button" data-example={example.title} onClick={() => open(example)}>
              {example.title}
            </button>
            <p>{example.description}</p>
          </li>
        ))}
      </ol>
    </div>
  );
}

const EXAMPLES_PLUGIN: GraphiQLPlugin = {
  title: 'Examples',
  icon: () => (
    <svg viewBox="0 0 24 24" width="20" height="20" fill="none" stroke="currentColor" strokeWidth="1.5" aria-hidden="true">
      <path d="M4 5h16M4 12h16M4 19h10" />
    </svg>
  ),
  content: ExamplesPanel,
};

/**
 * What to run: GraphiQL passes the operation name and document it parsed
 * last, and the editor is parsed a moment after each keystroke, so a query
 * typed and run at once arrived with the previous text's name and document
 * (a subscription was then sent over HTTP). The text being sent is parsed
 * here; a name it does not define is replaced by its only operation's.
 */
function current(query: string, operationName: string | null | undefined): { operationName: string | null; documentAST?: DocumentNode } {
  let documentAST: DocumentNode;
  try {
    documentAST = parse(query);
  } catch {
    return { operationName: operationName ?? null };
  }
  const operations = documentAST.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  const named = operations.some((operation) => operation.name?.value === operationName);
  return { operationName: named ? operationName! : operations.length === 1 ? (operations[0]!.name?.value ?? null) : (operationName ?? null), documentAST };
}

function Playground() {
  const token = readToken() ?? '';
  const authorization = `Bearer ${token}`;
  const send = createGraphiQLFetcher({
    url: GRAPHQL_PATH,
    headers: { authorization },
    wsClient: createClient({ url: webSocketUrl(), connectionParams: { authorization }, lazy: true }),
  });
  const fetcher: Fetcher = (params, options) => {
    const { operationName, documentAST } = current(params.query, params.operationName);
    return send({ ...params, operationName }, { ...options, ...(documentAST ? { documentAST } : {}) });
  };
  return (
    <GraphiQL
      fetcher={fetcher}
      plugins={[EXAMPLES_PLUGIN]}
      defaultTabs={EXAMPLES.slice(0, 2).map((example) => ({ query: example.query, variables: example.variables }))}
      defaultEditorToolsVisibility="variables"
    >
      <GraphiQL.Logo>
        <a href="/" className="playground-home">
          promptwire
        </a>
      </GraphiQL.Logo>
    </GraphiQL>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <SignInGate>
      <Playground />
    </SignInGate>
  </StrictMode>,
);
