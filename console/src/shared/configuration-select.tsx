/**
 * Choosing the configuration a run or a chat starts on: the active ones as
 * the API lists them, and which of them is chosen first.
 */
import type { ConfigurationsQuery } from '../../../src/client';

export type ListedConfiguration = ConfigurationsQuery['configurations'][number];

/** The configuration a newcomer meets first: the demo assistant needs no provider account. */
const PREFERRED_CONFIGURATION = 'demo-assistant';

/** The configurations a run can start on (the active ones), and the one chosen first ('' when there is none). */
export function startableConfigurations(all: readonly ListedConfiguration[]): { active: ListedConfiguration[]; chosen: string } {
  const active = all.filter((item) => item.isActive);
  return { active, chosen: (active.find((item) => item.identifier === PREFERRED_CONFIGURATION) ?? active[0])?.identifier ?? '' };
}

export function ConfigurationSelect(props: { configurations: readonly ListedConfiguration[]; value: string; onChange: (identifier: string) => void }) {
  return (
    <label>
      Configuration
      <select data-field="configuration" value={props.value} onChange={(event) => props.onChange(event.target.value)}>
        {props.configurations.map((item) => (
          <option key={item.identifier} value={item.identifier}>
            {item.name} ({item.identifier}){item.model ? ` · ${item.model.name}` : ''}
          </option>
        ))}
      </select>
    </label>
  );
}
