/**
 * Example operations a newcomer can run one after the other in the
 * playground, against the example data set a fresh embedded database gets.
 */
export interface ExampleOperation {
  title: string;
  description: string;
  query: string;
  variables?: string;
}

export const EXAMPLES: ExampleOperation[] = [
  {
    title: 'Snippets by tag',
    description: 'The active snippets carrying a tag, in prompt order, and the tag vocabulary in use.',
    query: `query SnippetsByTag($tag: String = "persona") {
  snippetTags
  snippets(tag: $tag) {
    identifier
    name
    tags
    snippet
  }
}`,
    variables: '{\n  "tag": "persona"\n}',
  },
  {
    title: "A configuration's effective prompt",
    description: 'What a configuration sends as its system prompt, and which snippets its tags select.',
    query: `query EffectivePrompt($identifier: String = "demo-assistant") {
  configuration(identifier: $identifier) {
    name
    systemPrompt
    snippetTags
    selectedSnippets { identifier name }
    effectiveSystemPrompt
    model { name provider { identifier adapterType } }
  }
}`,
    variables: '{\n  "identifier": "demo-assistant"\n}',
  },
  {
    title: 'A dry run',
    description: 'Assembles the prompt and stops before calling a model; the steps show what would be sent.',
    query: `mutation DryRun {
  startRun(input: {configuration: "demo-assistant", prompt: "What is 17 * 23?", tools: ["calculator"], dryRun: true}) {
    id
    status
  }
}`,
  },
  {
    title: 'Start a demo run',
    description: 'The local demo model calls the calculator and answers. Copy the id for the next example.',
    query: `mutation StartDemoRun {
  startRun(input: {configuration: "demo-assistant", prompt: "What is 17 * 23?", tools: ["calculator"]}) {
    id
    status
  }
}`,
  },
  {
    title: 'Watch a run live (runTrace)',
    description: 'A subscription over graphql-ws: the stored steps replayed, then live ones, ending after END. Paste a run id into the variables.',
    query: `subscription WatchRun($runId: ID!) {
  runTrace(runId: $runId) {
    sequence
    kind
    round
    content
    toolName
    toolResult
    status
  }
}`,
    variables: '{\n  "runId": "paste-a-run-id"\n}',
  },
  {
    title: 'Recent runs',
    description: 'The newest runs with their totals.',
    query: `query RecentRuns {
  runs(limit: 10) {
    id
    status
    configurationIdentifier
    iterations
    totalTokens
    estimatedCost
    finalContent
  }
}`,
  },
];
