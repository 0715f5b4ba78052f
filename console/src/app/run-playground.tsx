import { useEffect, useMemo, useState, type FormEvent } from 'react';
import {
  ConfigurationDetailDocument,
  ConfigurationsDocument,
  RunPlaygroundCatalogueDocument,
  StartRunDocument,
  ViewerDocument,
  type ConfigurationDetailQuery,
  type RunPlaygroundCatalogueQuery,
  type StartRunInput,
} from '../../../src/client';
import { ConfigurationSelect, startableConfigurations, type ListedConfiguration } from '../shared/configuration-select';
import { request } from '../shared/session';

type ConfigurationDetail = NonNullable<ConfigurationDetailQuery['configuration']>;


function toggle(list: readonly string[], value: string, on: boolean): string[] {
  return on ? [...list.filter((item) => item !== value), value] : list.filter((item) => item !== value);
}

export function RunPlayground() {
  const [configurations, setConfigurations] = useState<ListedConfiguration[] | null>(null);
  const [catalogue, setCatalogue] = useState<RunPlaygroundCatalogueQuery | null>(null);
  const [role, setRole] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [starting, setStarting] = useState(false);

  const [configuration, setConfiguration] = useState('');
  const [prompt, setPrompt] = useState('');
  const [tools, setTools] = useState<string[]>([]);
  const [forcedSnippets, setForcedSnippets] = useState<string[]>([]);
  const [forcedSkills, setForcedSkills] = useState<string[]>([]);
  const [systemPrompt, setSystemPrompt] = useState('');
  const [maxRounds, setMaxRounds] = useState('');
  const [dryRun, setDryRun] = useState(false);
  const [captureRaw, setCaptureRaw] = useState(false);

  useEffect(() => {
    Promise.all([request(ConfigurationsDocument, { limit: 100 }), request(RunPlaygroundCatalogueDocument, {}), request(ViewerDocument, {})])
      .then(([configurationData, catalogueData, viewerData]) => {
        const { active, chosen } = startableConfigurations(configurationData.configurations);
        setConfigurations(active);
        setCatalogue(catalogueData);
        setRole(viewerData.viewer.role);
        setConfiguration(chosen);
        setTools(catalogueData.tools.filter((tool) => tool.enabledByDefault).map((tool) => tool.name));
      })
      .catch((error: Error) => setProblem(error.message));
  }, []);

  const listed = useMemo(() => configurations?.find((item) => item.identifier === configuration) ?? null, [configurations, configuration]);
  // The effective prompt and what it is made of, read for the chosen configuration only.
  const [selected, setSelected] = useState<ConfigurationDetail | null>(null);
  useEffect(() => {
    if (configuration === '') return;
    let current = true;
    request(ConfigurationDetailDocument, { identifier: configuration })
      .then((data) => current && setSelected(data.configuration))
      .catch((error: Error) => current && setProblem(error.message));
    return () => {
      current = false;
    };
  }, [configuration]);

  const start = async (event: FormEvent) => {
    event.preventDefault();
    setProblem(null);
    const input: StartRunInput = { configuration, prompt, tools, dryRun };
    if (forcedSnippets.length > 0) input.forcedSnippets = forcedSnippets;
    if (forcedSkills.length > 0) input.forcedSkills = forcedSkills;
    if (systemPrompt.trim() !== '') input.systemPrompt = systemPrompt;
    if (maxRounds.trim() !== '') input.maxRounds = Number(maxRounds);
    if (captureRaw) input.captureRaw = true;
    setStarting(true);
    try {
      const data = await request(StartRunDocument, { input });
      window.location.assign(`/runs/${encodeURIComponent(data.startRun.id)}`);
    } catch (error) {
      setProblem((error as Error).message);
      setStarting(false);
    }
  };

  if (problem && !configurations) return <p className="problem">{problem}</p>;
  if (!configurations || !catalogue) return <p className="muted">Loading…</p>;

  return (
    <form className="run-playground" onSubmit={start}>
      <h1>New run</h1>
      <div className="columns">
        <div className="column">
          <ConfigurationSelect configurations={configurations} value={configuration} onChange={setConfiguration} />
          <label>
            Prompt
            <textarea data-field="prompt" rows={4} required value={prompt} placeholder="What is 17 * 23?" onChange={(event) => setPrompt(event.target.value)} />
          </label>
          <fieldset>
            <legend>Tools</legend>
            {catalogue.tools.map((tool) => (
              <label key={tool.name} className="check" title={tool.description}>
                <input type="checkbox" data-tool={tool.name} checked={tools.includes(tool.name)} onChange={(event) => setTools(toggle(tools, tool.name, event.target.checked))} />
                <code>{tool.name}</code> <span className="muted">{tool.description}</span>
              </label>
            ))}
          </fieldset>
          <details>
            <summary>Forced snippets and skills, system prompt override, rounds</summary>
            <fieldset>
              <legend>Forced snippets</legend>
              {catalogue.snippets
                .filter((snippet) => snippet.isActive)
                .map((snippet) => (
                  <label key={snippet.identifier} className="check">
                    <input
                      type="checkbox"
                      data-forced-snippet={snippet.identifier}
                      checked={forcedSnippets.includes(snippet.identifier)}
                      onChange={(event) => setForcedSnippets(toggle(forcedSnippets, snippet.identifier, event.target.checked))}
                    />
                    {snippet.name} <span className="muted">{snippet.tags.join(', ')}</span>
                  </label>
                ))}
            </fieldset>
            <fieldset>
              <legend>Forced skills</legend>
              {catalogue.skills.length === 0 && <p className="muted">No skills defined.</p>}
              {catalogue.skills.map((skill) => (
                <label key={skill.identifier} className="check">
                  <input
                    type="checkbox"
                    data-forced-skill={skill.identifier}
                    checked={forcedSkills.includes(skill.identifier)}
                    onChange={(event) => setForcedSkills(toggle(forcedSkills, skill.identifier, event.target.checked))}
                  />
                  {skill.name}
                </label>
              ))}
            </fieldset>
            <label>
              System prompt override
              <textarea data-field="systemPrompt" rows={3} value={systemPrompt} placeholder="Leave empty to use the configuration's" onChange={(event) => setSystemPrompt(event.target.value)} />
            </label>
            <label>
              Max rounds
              <input data-field="maxRounds" type="number" min={1} value={maxRounds} onChange={(event) => setMaxRounds(event.target.value)} />
            </label>
          </details>
          <label className="check">
            <input type="checkbox" data-field="dryRun" checked={dryRun} onChange={(event) => setDryRun(event.target.checked)} />
            Dry run (assemble the prompt and stop before calling the model)
          </label>
          {role === 'ADMIN' && (
            <label className="check">
              <input type="checkbox" data-field="captureRaw" checked={captureRaw} onChange={(event) => setCaptureRaw(event.target.checked)} />
              Capture raw provider responses
            </label>
          )}
          {problem && <p className="problem">{problem}</p>}
          <button type="submit" data-action="start" disabled={starting || configuration === ''}>
            {starting ? 'Starting…' : 'Start run'}
          </button>
        </div>
        <aside className="column">
          <h2>Effective system prompt</h2>
          {selected && listed && selected.identifier === listed.identifier ? (
            <>
              <p className="muted">
                {listed.model ? `${listed.model.name} via ${listed.model.provider?.identifier ?? '?'} (${listed.model.provider?.adapterType ?? '?'})` : 'No model'}
                {' · '}tags: {selected.snippetTags.length > 0 ? selected.snippetTags.join(', ') : 'none'}
              </p>
              <pre data-effective-prompt className="prompt">
                {systemPrompt.trim() !== '' ? systemPrompt : selected.effectiveSystemPrompt}
              </pre>
              <h3>Selected snippets</h3>
              {selected.selectedSnippets.length === 0 ? (
                <p className="muted">The tags select no snippet.</p>
              ) : (
                <ul data-selected-snippets>
                  {selected.selectedSnippets.map((snippet) => (
                    <li key={snippet.identifier}>
                      {snippet.name} <code>{snippet.identifier}</code> <span className="muted">{snippet.tags.join(', ')}</span>
                    </li>
                  ))}
                </ul>
              )}
              {selected.skills.length > 0 && (
                <>
                  <h3>Skills</h3>
                  <ul>
                    {selected.skills.map((skill) => (
                      <li key={skill.identifier}>{skill.name}</li>
                    ))}
                  </ul>
                </>
              )}
            </>
          ) : (
            <p className="muted">{configuration === '' ? 'No active configuration.' : 'Loading…'}</p>
          )}
        </aside>
      </div>
    </form>
  );
}
