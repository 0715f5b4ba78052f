/**
 * Small factories and waits for the run suites: each test builds its own
 * provider (pointing at its own scripted server), model and configuration
 * through GraphQL, the way a client would, under identifiers nobody else uses.
 */
import crypto from 'node:crypto';
import type { TestServer } from '../support/server';
import { gate, ScriptedProvider } from './scripted-provider';

export const API_KEY = 'test-key';

export const STEP_FIELDS = `
  sequence kind round durationMs
  messagesSent { role content toolCalls { id name arguments } toolCallId }
  toolsOffered content thinking finishReason promptTokens completionTokens totalTokens estimatedCost
  requestedToolCalls { id name arguments }
  raw toolCallId toolName toolArguments toolResult toolIsError contextBudget status terminationReason error
`;

export const RUN_FIELDS = `
  id status terminationReason dryRun iterations truncated finalContent
  promptTokens completionTokens totalTokens estimatedCost error startedAt finishedAt
`;

export interface ChatMessageView {
  role: string;
  content: string | null;
  toolCalls: { id: string; name: string; arguments: unknown }[] | null;
  toolCallId: string | null;
}

export interface StepView {
  sequence: number;
  kind: 'ASSEMBLED' | 'CONTEXT' | 'REQUEST' | 'LLM' | 'TOOL' | 'END';
  round: number;
  durationMs: number;
  messagesSent: ChatMessageView[] | null;
  toolsOffered: string[] | null;
  content: string | null;
  thinking: string | null;
  finishReason: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  totalTokens: number | null;
  estimatedCost: number | null;
  requestedToolCalls: { id: string; name: string; arguments: unknown }[] | null;
  raw: unknown;
  toolCallId: string | null;
  toolName: string | null;
  toolArguments: unknown;
  toolResult: string | null;
  toolIsError: boolean | null;
  contextBudget: Record<string, unknown> | null;
  status: string | null;
  terminationReason: string | null;
  error: string | null;
}

export interface RunView {
  id: string;
  status: 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';
  terminationReason: string | null;
  dryRun: boolean;
  iterations: number;
  truncated: boolean;
  finalContent: string | null;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  estimatedCost: number | null;
  error: string | null;
  startedAt: string | null;
  finishedAt: string | null;
}

export type RunWithSteps = RunView & { steps: StepView[] };

/** Lower-case, unique across tests, workers and dialects. */
export function uniqueIdentifier(prefix: string): string {
  return `${prefix}_${crypto.randomBytes(5).toString('hex')}`;
}

export interface RunSetupOptions {
  maxRetries?: number;
  apiTimeout?: number;
  costInput?: number;
  costOutput?: number;
  contextLength?: number;
  maxOutputTokens?: number;
  systemPrompt?: string;
  snippetTags?: string[];
  skills?: string[];
  maxTokens?: number;
}

export interface RunSetup {
  provider: ScriptedProvider;
  providerIdentifier: string;
  modelIdentifier: string;
  configuration: string;
  configurationUid: number;
}

/** Everything a run needs, created through GraphQL mutations as an ADMIN client would. */
export class RunKit {
  private readonly providers: ScriptedProvider[] = [];

  constructor(private readonly ts: () => TestServer) {}

  async setup(options: RunSetupOptions = {}): Promise<RunSetup> {
    const ts = this.ts();
    const provider = await ScriptedProvider.start();
    this.providers.push(provider);
    const providerIdentifier = uniqueIdentifier('prov');
    const modelIdentifier = uniqueIdentifier('model');
    const configuration = uniqueIdentifier('conf');
    await ts.ok(
      `mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid hasApiKey } }`,
      {
        input: {
          identifier: providerIdentifier,
          name: `Scripted ${providerIdentifier}`,
          adapterType: 'custom',
          endpointUrl: provider.url,
          apiKey: API_KEY,
          maxRetries: options.maxRetries ?? 0,
          apiTimeout: options.apiTimeout ?? 30,
        },
      },
    );
    await ts.ok(`mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }`, {
      input: {
        identifier: modelIdentifier,
        name: `Model ${modelIdentifier}`,
        provider: providerIdentifier,
        modelId: 'scripted-gpt',
        ...(options.contextLength !== undefined ? { contextLength: options.contextLength } : {}),
        ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
        ...(options.costInput !== undefined ? { costInput: options.costInput } : {}),
        ...(options.costOutput !== undefined ? { costOutput: options.costOutput } : {}),
      },
    });
    const created = await ts.ok<{ createConfiguration: { uid: number } }>(
      `mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }`,
      {
        input: {
          identifier: configuration,
          name: `Configuration ${configuration}`,
          model: modelIdentifier,
          ...(options.systemPrompt !== undefined ? { systemPrompt: options.systemPrompt } : {}),
          ...(options.snippetTags !== undefined ? { snippetTags: options.snippetTags } : {}),
          ...(options.skills !== undefined ? { skills: options.skills } : {}),
          ...(options.maxTokens !== undefined ? { maxTokens: options.maxTokens } : {}),
        },
      },
    );
    return { provider, providerIdentifier, modelIdentifier, configuration, configurationUid: created.createConfiguration.uid };
  }

  async createSnippet(input: { identifier: string; name: string; snippet: string; tags?: string[]; sorting?: number }): Promise<void> {
    await this.ts().ok(`mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }`, { input });
  }

  async createSkill(input: { identifier: string; name: string; body: string; enabled?: boolean }): Promise<void> {
    await this.ts().ok(`mutation($input: CreateSkillInput!) { createSkill(input: $input) { uid } }`, { input: { enabled: true, ...input } });
  }

  async startRun(input: Record<string, unknown>, token?: string): Promise<RunView> {
    const data = await this.ts().ok<{ startRun: RunView }>(`mutation($input: StartRunInput!) { startRun(input: $input) { ${RUN_FIELDS} } }`, { input }, token);
    return data.startRun;
  }

  async run(id: string): Promise<RunWithSteps> {
    const data = await this.ts().ok<{ run: RunWithSteps | null }>(`query($id: ID!) { run(id: $id) { ${RUN_FIELDS} steps { ${STEP_FIELDS} } } }`, { id });
    if (!data.run) throw new Error(`run ${id} not found`);
    return data.run;
  }

  /** Polls until the run is no longer QUEUED or RUNNING, then returns it with its steps. */
  async waitForRun(id: string, timeoutMs = 15_000): Promise<RunWithSteps> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const data = await this.ts().ok<{ run: { status: string } | null }>(`query($id: ID!) { run(id: $id) { status } }`, { id });
      if (data.run && data.run.status !== 'QUEUED' && data.run.status !== 'RUNNING') return this.run(id);
      if (Date.now() > deadline) throw new Error(`run ${id} still ${data.run?.status} after ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  /**
   * A run that asks for one calculator call, then answers; its first model call
   * is held until release(). Resolves once CONTEXT and REQUEST of round 1 are stored.
   */
  async startHeldToolRun(expression = '3 * 3', answer = 'Nine.'): Promise<{ id: string; release: () => void }> {
    const setup = await this.setup();
    const held = gate();
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression } }], usage: { prompt: 5, completion: 5 }, gate: held.promise },
      { text: answer, usage: { prompt: 5, completion: 5 } },
    );
    const started = await this.startRun({ configuration: setup.configuration, prompt: 'x', tools: ['calculator'] });
    await setup.provider.waitForRequest(1);
    return { id: started.id, release: held.open };
  }

  async closeProviders(): Promise<void> {
    await Promise.all(this.providers.splice(0).map((p) => p.close()));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The trace's shape rules: sequences 1..n without gaps, exactly one END and
 * it is last; within each round CONTEXT, REQUEST, LLM, then TOOL steps.
 */
export function expectWellFormedTrace(steps: readonly { sequence: number; kind: string; round: number }[]): void {
  expect(steps.map((s) => s.sequence)).toEqual(steps.map((_, i) => i + 1));
  expect(steps.filter((s) => s.kind === 'END')).toHaveLength(1);
  expect(steps[steps.length - 1]?.kind).toBe('END');
  const body = steps.slice(0, -1);
  if (body.length === 1 && body[0]?.kind === 'ASSEMBLED') return;
  const rounds: string[] = [];
  let previousRound = 0;
  for (const step of body) {
    expect(step.round).toBeGreaterThanOrEqual(previousRound);
    if (step.round !== previousRound) rounds.push('');
    previousRound = step.round;
    rounds[rounds.length - 1] += `${step.kind} `;
  }
  for (const kinds of rounds) expect(kinds.trim()).toMatch(/^CONTEXT(?: REQUEST(?: LLM(?: APPROVAL)*(?: TOOL)*)?)?$/);
  const distinctRounds = [...new Set(body.map((s) => s.round))];
  expect(distinctRounds).toEqual(distinctRounds.map((_, i) => i + 1));
}

/** Anything that sends a GraphQL operation and fails on errors (a TestServer, a ServerProcess). */
export interface GraphQLCaller {
  ok<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, token?: string | null): Promise<T>;
}

/** A provider pointing at `provider`, a model and a configuration, under fresh identifiers; returns the configuration's identifier. */
export async function createScriptedConfiguration(server: GraphQLCaller, provider: ScriptedProvider): Promise<string> {
  const providerId = uniqueIdentifier('prov');
  const modelId = uniqueIdentifier('model');
  const configuration = uniqueIdentifier('conf');
  await server.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
    input: { identifier: providerId, name: 'Scripted', adapterType: 'custom', endpointUrl: provider.url, apiKey: 'test-key', maxRetries: 0 },
  });
  await server.ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: modelId, name: 'M', provider: providerId, modelId: 'scripted' } });
  await server.ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: configuration, name: 'C', model: modelId } });
  return configuration;
}
