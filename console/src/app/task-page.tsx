import { useCallback, useEffect, useState, type FormEvent } from 'react';
import {
  ConfigurationsDocument,
  RenderTaskDocument,
  RunDocument,
  RunPlaygroundCatalogueDocument,
  RunTaskDocument,
  TaskDocument,
  UpdateTaskDocument,
  watchRun,
  type ConfigurationsQuery,
  type RenderTaskQuery,
  type RunQuery,
  type TaskQuery,
  type UpdateTaskInput,
} from '../../../src/client';
import { FINISHED_STATUSES, formatTime } from '../shared/format';
import { readToken, request, webSocketUrl } from '../shared/session';
import { declarationsOf, draftsOf, schemaOf, textOf, valueOf, type TypedValue, type VariableDraft } from './task-values';
import { TASK_CATEGORIES } from './tasks-list';

type Task = NonNullable<TaskQuery['task']>;
type Rendered = RenderTaskQuery['renderTask'];
type Run = NonNullable<RunQuery['run']>;

const OUTPUT_FORMATS = ['markdown', 'json', 'plain', 'html'] as const;
const INPUT_TYPES = ['manual', 'syslog', 'deprecation_log', 'table', 'file'] as const;
const VARIABLE_TYPES = ['string', 'number', 'integer', 'boolean'] as const;

/** The edit form's fields. */
interface Draft {
  name: string;
  description: string;
  category: string;
  configuration: string;
  promptTemplate: string;
  inputType: string;
  outputFormat: string;
  outputSchema: string;
  skills: string[];
  variables: VariableDraft[];
  isActive: boolean;
  sorting: string;
}

function draftOf(task: Task): Draft {
  return {
    name: task.name,
    description: task.description ?? '',
    category: task.category,
    configuration: task.configuration ?? '',
    promptTemplate: task.promptTemplate,
    inputType: task.inputType,
    outputFormat: task.outputFormat,
    outputSchema: task.outputSchema === null ? '' : JSON.stringify(task.outputSchema, null, 2),
    skills: task.skills,
    // What is declared is what the latest version stored; the placeholders without a declaration are required strings.
    variables: draftsOf(task.versions[0]?.variables),
    isActive: task.isActive,
    sorting: String(task.sorting),
  };
}

/** One task: edit and save it (a new version), preview exactly what it sends, and try it. */
export function TaskPage({ identifier }: { identifier: string }) {
  const [task, setTask] = useState<Task | null | undefined>(undefined);
  const [draft, setDraft] = useState<Draft | null>(null);
  const [configurations, setConfigurations] = useState<ConfigurationsQuery['configurations']>([]);
  const [skills, setSkills] = useState<{ identifier: string; name: string }[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const [saveProblem, setSaveProblem] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);

  const load = useCallback(async () => {
    const data = await request(TaskDocument, { identifier, versions: 10 });
    setTask(data.task);
    if (data.task) setDraft(draftOf(data.task));
  }, [identifier]);

  useEffect(() => {
    Promise.all([load(), request(ConfigurationsDocument, { limit: 100 }), request(RunPlaygroundCatalogueDocument, {})])
      .then(([, configurationData, catalogue]) => {
        setConfigurations(configurationData.configurations);
        setSkills(catalogue.skills);
      })
      .catch((error: Error) => setProblem(error.message));
  }, [load]);

  const save = async (event: FormEvent) => {
    event.preventDefault();
    if (!task || !draft) return;
    setSaveProblem(null);
    setSaved(null);
    const schema = schemaOf(draft.outputSchema);
    if (!schema.ok) {
      setSaveProblem(schema.message);
      return;
    }
    const input = changedFields(draftOf(task), draft, schema.value);
    if (Object.keys(input).length === 0) {
      setSaved('Nothing changed.');
      return;
    }
    setSaving(true);
    try {
      const data = await request(UpdateTaskDocument, { uid: task.uid, input });
      await load();
      setSaved(`Saved at ${formatTime(data.updateTask.updatedAt)}.`);
    } catch (error) {
      setSaveProblem((error as Error).message);
    } finally {
      setSaving(false);
    }
  };

  if (problem) return <p className="problem">{problem}</p>;
  if (task === undefined || !draft) return <p className="muted">Loading…</p>;
  if (task === null) return <p className="problem">Task not found</p>;

  const change = (fields: Partial<Draft>) => setDraft({ ...draft, ...fields });
  const changeVariable = (index: number, fields: Partial<VariableDraft>) => change({ variables: draft.variables.map((variable, i) => (i === index ? { ...variable, ...fields } : variable)) });

  return (
    <section className="task-page">
      <div className="title-row">
        <h1>{task.name}</h1>
        <code className="run-id">{task.identifier}</code>
        {!task.isActive && <span className="tag">inactive</span>}
        <a className="button" href="/tasks">
          All tasks
        </a>
      </div>
      <div className="columns">
        <form className="column task-edit" onSubmit={save}>
          <h2>Edit</h2>
          <label>
            Name
            <input data-field="name" value={draft.name} onChange={(event) => change({ name: event.target.value })} />
          </label>
          <label>
            Description
            <input data-field="description" value={draft.description} onChange={(event) => change({ description: event.target.value })} />
          </label>
          <div className="row">
            <label>
              Category
              <select data-field="category" value={draft.category} onChange={(event) => change({ category: event.target.value })}>
                {withValue(TASK_CATEGORIES, draft.category).map((name) => (
                  <option key={name}>{name}</option>
                ))}
              </select>
            </label>
            <label>
              Input type
              <select data-field="inputType" value={draft.inputType} onChange={(event) => change({ inputType: event.target.value })}>
                {withValue(INPUT_TYPES, draft.inputType).map((name) => (
                  <option key={name}>{name}</option>
                ))}
              </select>
            </label>
            <label>
              Sorting
              <input data-field="sorting" type="number" min={0} value={draft.sorting} onChange={(event) => change({ sorting: event.target.value })} />
            </label>
          </div>
          <label>
            Configuration
            <select data-field="configuration" value={draft.configuration} onChange={(event) => change({ configuration: event.target.value })}>
              <option value="">the active default configuration</option>
              {configurations.map((item) => (
                <option key={item.identifier} value={item.identifier}>
                  {item.name} ({item.identifier})
                </option>
              ))}
            </select>
          </label>
          <label>
            Prompt template <span className="muted">(<code>{'{{input}}'}</code> is the input; any other <code>{'{{name}}'}</code> a variable)</span>
            <textarea data-field="promptTemplate" rows={6} value={draft.promptTemplate} onChange={(event) => change({ promptTemplate: event.target.value })} />
          </label>
          <fieldset>
            <legend>Declared variables</legend>
            <p className="muted">A placeholder left undeclared is a required string.</p>
            {draft.variables.map((variable, index) => (
              <div className="row variable" key={index} data-declared-variable={index}>
                <input aria-label="name" data-variable-field="name" placeholder="name" value={variable.name} onChange={(event) => changeVariable(index, { name: event.target.value })} />
                <select aria-label="type" data-variable-field="type" value={variable.type} onChange={(event) => changeVariable(index, { type: event.target.value })}>
                  {withValue(VARIABLE_TYPES, variable.type).map((name) => (
                    <option key={name}>{name}</option>
                  ))}
                </select>
                <input aria-label="default" data-variable-field="default" placeholder="default (none: required)" value={variable.defaultText} onChange={(event) => changeVariable(index, { defaultText: event.target.value })} />
                <input aria-label="description" data-variable-field="description" placeholder="description" value={variable.description} onChange={(event) => changeVariable(index, { description: event.target.value })} />
                <button type="button" className="link" data-action="remove-variable" onClick={() => change({ variables: draft.variables.filter((_, i) => i !== index) })}>
                  remove
                </button>
              </div>
            ))}
            <button type="button" className="link" data-action="add-variable" onClick={() => change({ variables: [...draft.variables, { name: '', type: 'string', defaultText: '', description: '' }] })}>
              + declare a variable
            </button>
          </fieldset>
          <fieldset>
            <legend>Output</legend>
            <label>
              Format
              <select data-field="outputFormat" value={draft.outputFormat} onChange={(event) => change({ outputFormat: event.target.value })}>
                {withValue(OUTPUT_FORMATS, draft.outputFormat).map((name) => (
                  <option key={name}>{name}</option>
                ))}
              </select>
            </label>
            <label>
              JSON Schema <span className="muted">(json only; the answer is validated on the server, with one repair call)</span>
              <textarea data-field="outputSchema" rows={4} value={draft.outputSchema} placeholder="none" onChange={(event) => change({ outputSchema: event.target.value })} />
            </label>
          </fieldset>
          <fieldset>
            <legend>Skills (after the configuration's)</legend>
            {skills.length === 0 && <p className="muted">No skills defined.</p>}
            {skills.map((skill) => (
              <label key={skill.identifier} className="check">
                <input
                  type="checkbox"
                  data-skill={skill.identifier}
                  checked={draft.skills.includes(skill.identifier)}
                  onChange={(event) => change({ skills: event.target.checked ? [...draft.skills, skill.identifier] : draft.skills.filter((item) => item !== skill.identifier) })}
                />
                {skill.name}
              </label>
            ))}
          </fieldset>
          <label className="check">
            <input type="checkbox" data-field="isActive" checked={draft.isActive} onChange={(event) => change({ isActive: event.target.checked })} />
            Active
          </label>
          {saveProblem && (
            <p className="problem" data-save-problem>
              {saveProblem}
            </p>
          )}
          {saved && (
            <p className="muted" data-saved>
              {saved}
            </p>
          )}
          <button type="submit" data-action="save" disabled={saving}>
            {saving ? 'Saving…' : 'Save'}
          </button>
          <h3>Versions</h3>
          <ol className="versions" data-versions>
            {task.versions.map((version) => (
              <li key={version.version} data-version={version.version}>
                <strong>v{version.version}</strong> <span className="muted">{formatTime(version.createdAt)} · {version.source}{version.author ? ` · ${version.author}` : ''}</span>
              </li>
            ))}
          </ol>
        </form>
        <TaskTry task={task} />
      </div>
    </section>
  );
}

/**
 * Only what the form changed is sent: a field the editor left alone keeps
 * the stored value, also one outside nr_llm's lists that TYPO3 wrote (which
 * the server would refuse if it were sent back), and a concurrent change
 * to another field is not overwritten.
 */
function changedFields(before: Draft, after: Draft, outputSchema: unknown): UpdateTaskInput {
  const input: UpdateTaskInput = {};
  if (after.name !== before.name) input.name = after.name;
  if (after.description !== before.description) input.description = after.description === '' ? null : after.description;
  if (after.category !== before.category) input.category = after.category;
  if (after.configuration !== before.configuration) input.configuration = after.configuration;
  if (after.promptTemplate !== before.promptTemplate) input.promptTemplate = after.promptTemplate;
  if (after.inputType !== before.inputType) input.inputType = after.inputType;
  if (after.outputFormat !== before.outputFormat) input.outputFormat = after.outputFormat;
  if (after.outputSchema !== before.outputSchema) input.outputSchema = outputSchema;
  if (JSON.stringify(after.skills) !== JSON.stringify(before.skills)) input.skills = after.skills;
  if (JSON.stringify(after.variables) !== JSON.stringify(before.variables)) input.variables = declarationsOf(after.variables);
  if (after.isActive !== before.isActive) input.isActive = after.isActive;
  if (after.sorting !== before.sorting) input.sorting = Number(after.sorting);
  return input;
}

/** The list of allowed values, with a stored value outside it (a row TYPO3 wrote) kept selectable. */
function withValue(allowed: readonly string[], value: string): string[] {
  return allowed.includes(value) ? [...allowed] : [...allowed, value];
}

/** Preview and try: the saved task, with the input and variables typed here. */
function TaskTry({ task }: { task: Task }) {
  const [values, setValues] = useState<Record<string, string>>({});
  const [rendered, setRendered] = useState<Rendered | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [runId, setRunId] = useState<string | null>(null);

  const call = () => {
    let input: string | null = null;
    const variables: Record<string, TypedValue> = {};
    for (const variable of task.variables) {
      const value = valueOf(values[variable.name] ?? '', variable.type);
      if (value === undefined) continue;
      if (variable.name === 'input') input = String(value);
      else variables[variable.name] = value;
    }
    return { input, variables };
  };

  const preview = async () => {
    setProblem(null);
    setRendered(null);
    setBusy(true);
    try {
      setRendered((await request(RenderTaskDocument, { identifier: task.identifier, ...call() })).renderTask);
    } catch (error) {
      setProblem((error as Error).message);
    } finally {
      setBusy(false);
    }
  };

  const tryIt = async () => {
    setProblem(null);
    setRunId(null);
    setBusy(true);
    try {
      const data = await request(RunTaskDocument, { input: { task: task.identifier, ...call(), wait: false } });
      setRunId(data.runTask.run.id);
    } catch (error) {
      setProblem((error as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <aside className="column task-try">
      <h2>Preview and try</h2>
      <p className="muted">These use the saved task.</p>
      {task.variables.map((variable) => (
        <label key={variable.name}>
          <code>{variable.name}</code>{' '}
          <span className="muted">
            {variable.type}
            {variable.required ? ', required' : `, default ${textOf(variable.default)}`}
            {variable.description ? ` · ${variable.description}` : ''}
          </span>
          {variable.name === 'input' ? (
            <textarea data-variable="input" rows={3} value={values.input ?? ''} onChange={(event) => setValues({ ...values, input: event.target.value })} />
          ) : (
            <input data-variable={variable.name} value={values[variable.name] ?? ''} onChange={(event) => setValues({ ...values, [variable.name]: event.target.value })} />
          )}
        </label>
      ))}
      <div className="row">
        <button type="button" data-action="preview" disabled={busy} onClick={() => void preview()}>
          Preview
        </button>
        <button type="button" data-action="try" disabled={busy} onClick={() => void tryIt()}>
          Try it
        </button>
      </div>
      {problem && (
        <p className="problem" data-task-problem>
          {problem}
        </p>
      )}
      {rendered && (
        <div data-render>
          <p className="muted">
            Configuration <code>{rendered.configuration}</code>
            {rendered.appliedSkills.length > 0 ? ` · skills ${rendered.appliedSkills.join(', ')}` : ''}
          </p>
          <h3>System prompt</h3>
          {rendered.systemPrompt === '' ? <p className="muted">No system message is sent.</p> : <pre data-render-system>{rendered.systemPrompt}</pre>}
          <h3>User prompt</h3>
          <pre data-render-user>{rendered.userPrompt}</pre>
          <h3>Call options</h3>
          <pre data-render-options>{JSON.stringify(rendered.callOptions, null, 2)}</pre>
        </div>
      )}
      {runId && <TryRun key={runId} id={runId} />}
    </aside>
  );
}

/** A task run as it goes: its steps followed live, then its answer. */
function TryRun({ id }: { id: string }) {
  const [status, setStatus] = useState('QUEUED');
  const [steps, setSteps] = useState(0);
  const [run, setRun] = useState<Run | null>(null);
  const [problem, setProblem] = useState<string | null>(null);

  useEffect(() => {
    const controller = new AbortController();
    (async () => {
      try {
        for await (const step of watchRun({ url: webSocketUrl(), token: readToken() ?? '', runId: id, messagesSent: false, signal: controller.signal })) {
          setSteps((count) => count + 1);
          if (step.kind === 'END') {
            const data = await request(RunDocument, { id });
            setRun(data.run);
            setStatus(data.run?.status ?? step.status ?? 'COMPLETED');
          } else setStatus('RUNNING');
        }
      } catch (error) {
        if (!controller.signal.aborted) setProblem((error as Error).message);
      }
    })();
    return () => controller.abort();
  }, [id]);

  const ended = run !== null && FINISHED_STATUSES.has(run.status);
  return (
    <div className="try-run" data-try-run={id}>
      <h3>
        Run <a href={`/runs/${encodeURIComponent(id)}`} data-link="run">{id}</a>{' '}
        <span className={`status status-${status.toLowerCase()}`} data-try-status>
          {status}
        </span>
      </h3>
      <p className="muted">{steps} steps so far. Open the run page for the full trace.</p>
      {problem && <p className="problem">{problem}</p>}
      {ended && run.error && <p className="problem">{run.error}</p>}
      {ended && run.finalContent !== null && (
        <div className="final">
          <pre data-try-output>{run.finalContent}</pre>
        </div>
      )}
    </div>
  );
}
