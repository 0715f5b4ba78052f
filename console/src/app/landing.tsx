import { useEffect, useState } from 'react';
import { ViewerDocument, type ViewerQuery } from '../../../src/client';
import { request } from '../shared/session';

export function Landing() {
  const [viewer, setViewer] = useState<ViewerQuery['viewer'] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    request(ViewerDocument, {})
      .then((data) => setViewer(data.viewer))
      .catch((error: Error) => setProblem(error.message));
  }, []);
  return (
    <section className="landing">
      <h1>promptwire console</h1>
      <p className="muted">{viewer ? `Signed in as ${viewer.name} (${viewer.role}).` : problem ? `Could not read your token: ${problem}` : 'Checking your token…'}</p>
      <div className="tiles">
        <a className="tile" href="/playground" data-link="playground">
          <h2>Playground</h2>
          <p>GraphiQL on this server: queries, mutations and live subscriptions, the schema's docs, history and example operations.</p>
        </a>
        <a className="tile" href="/runs/new" data-link="runs-new">
          <h2>Run playground</h2>
          <p>Pick a configuration, see its effective prompt, choose tools and start an agent run. Try the demo assistant: it needs no account.</p>
        </a>
        <a className="tile" href="/tasks" data-link="tasks">
          <h2>Tasks</h2>
          <p>Named prompt templates with variables: edit them, preview exactly what they send, and try them.</p>
        </a>
        <a className="tile" href="/runs" data-link="runs">
          <h2>Runs</h2>
          <p>Every run, newest first, updating live. Open one to watch its trace step by step.</p>
        </a>
        <a className="tile" href="/usage" data-link="usage">
          <h2>Usage</h2>
          <p>Tokens, cost and requests per day, by model, configuration and source, from the usage ledger TYPO3 shares (administrators).</p>
        </a>
      </div>
    </section>
  );
}
