/**
 * The typed task documents of `promptwire/client` against the real server:
 * each document's text is what a front end sends, and its result type is
 * what comes back (a stale document would fail here or in the drift test).
 */
import WebSocket from 'ws';
import {
  CreateTaskDocument,
  DeleteTaskDocument,
  PublishTaskDocument,
  RenderTaskDocument,
  RestoreTaskDocument,
  RunTaskDocument,
  TaskDocument,
  TasksDocument,
  TaskVersionDiffDocument,
  UpdateTaskDocument,
  watchRun,
  type TypedDocumentString,
} from '../../src/client';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';

describe.each(testDialects)('typed task documents (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);
  beforeAll(async () => {
    t = await startTestServer(dialect);
  });
  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  /** One operation over HTTP as a client sends it: the document's text and typed variables, the typed result. */
  const send = <R, V>(document: TypedDocumentString<R, V>, variables: V): Promise<R> => t.ok<R>(document.toString(), variables as Record<string, unknown>);

  it('create, list by category, read with versions, update, diff, render, run, publish, restore and delete a task', async () => {
    const setup = await kit.setup({ systemPrompt: 'You write headlines.' });
    const identifier = uniqueIdentifier('client_task');
    const { createTask } = await send(CreateTaskDocument, {
      input: { identifier, name: 'Headline', category: 'content', configuration: setup.configuration, promptTemplate: 'Headline ({{words}} words): {{input}}', variables: [{ name: 'words', type: 'integer', default: 8 }] },
    });
    expect(createTask).toMatchObject({ identifier, category: 'content', configuration: setup.configuration, outputFormat: 'markdown', isActive: true });
    expect(createTask.variables).toEqual([
      { name: 'words', type: 'integer', required: false, default: 8, description: null },
      { name: 'input', type: 'string', required: true, default: null, description: null },
    ]);

    const listed = await send(TasksDocument, { category: 'content' });
    expect(listed.tasks.map((task) => task.identifier)).toContain(identifier);
    expect(listed.tasks.every((task) => task.category === 'content')).toBe(true);

    const { updateTask } = await send(UpdateTaskDocument, { uid: createTask.uid, input: { promptTemplate: 'Short headline ({{words}} words): {{input}}' } });
    expect(updateTask.promptTemplate).toBe('Short headline ({{words}} words): {{input}}');
    const read = await send(TaskDocument, { identifier });
    expect(read.task!.versions.map((version) => [version.version, version.source])).toEqual([
      [2, 'api'],
      [1, 'api'],
    ]);
    const diff = await send(TaskVersionDiffDocument, { uid: createTask.uid, from: 1, to: 2 });
    expect(diff.taskVersionDiff.fields.map((field) => field.field)).toEqual(['promptTemplate']);

    const { renderTask } = await send(RenderTaskDocument, { identifier, input: 'Cats sleep a lot', variables: { words: 5 } });
    expect(renderTask).toMatchObject({ configuration: setup.configuration, label: null, systemPrompt: 'You write headlines.', userPrompt: 'Short headline (5 words): Cats sleep a lot', appliedSkills: [] });
    expect(renderTask.messages).toEqual([
      { role: 'system', content: 'You write headlines.' },
      { role: 'user', content: 'Short headline (5 words): Cats sleep a lot' },
    ]);
    expect(setup.provider.requests).toHaveLength(0);

    setup.provider.script({ text: 'Cats: the sleep champions' }, { text: 'Released headline' });
    const { runTask } = await send(RunTaskDocument, { input: { task: identifier, input: 'Cats sleep a lot' } });
    expect(runTask).toMatchObject({ content: 'Cats: the sleep champions', attempts: 1, outputFormat: 'markdown', output: null, outputValid: null });
    expect(runTask.run).toMatchObject({ status: 'COMPLETED', task: identifier });

    await t.ok('mutation($id: String!) { publishConfiguration(identifier: $id, label: "production") { id } }', { id: setup.configuration });
    const { publishTask } = await send(PublishTaskDocument, { identifier, label: 'production' });
    expect(publishTask).toMatchObject({ task: identifier, label: 'production', version: 2 });
    const queued = await send(RunTaskDocument, { input: { task: identifier, input: 'Dogs', label: 'production', wait: false } });
    expect(queued.runTask.run.status).toBe('QUEUED');
    const steps = [];
    for await (const step of watchRun({ url: t.url, token: ADMIN_TOKEN, runId: queued.runTask.run.id, webSocketImpl: WebSocket })) steps.push(step);
    expect(steps.at(-1)).toMatchObject({ kind: 'END', status: 'COMPLETED' });
    expect(steps.find((step) => step.kind === 'LLM')?.content).toBe('Released headline');

    const { restoreTask } = await send(RestoreTaskDocument, { uid: createTask.uid, version: 1 });
    expect(restoreTask.promptTemplate).toBe('Headline ({{words}} words): {{input}}');
    expect((await send(DeleteTaskDocument, { uid: createTask.uid })).deleteTask).toBe(true);
    expect((await send(TaskDocument, { identifier })).task).toBeNull();
  });

  it('a bad variable comes back as the server\'s BAD_USER_INPUT through the typed render document', async () => {
    const setup = await kit.setup();
    const identifier = uniqueIdentifier('client_task');
    await send(CreateTaskDocument, { input: { identifier, name: 'T', configuration: setup.configuration, promptTemplate: 'For {{audience}}: {{input}}' } });
    const result = await t.gql(RenderTaskDocument.toString(), { identifier, input: 'x', variables: { tone: 'dry' } });
    expect(result.errors?.[0]).toMatchObject({ message: 'Missing variables: audience; Unknown variables: tone', extensions: { code: 'BAD_USER_INPUT' } });
  });
});
