/**
 * The tasks feature and its one front door: nr_llm's one-shot prompt tasks
 * (`tx_nrllm_task`), rendered and run by name with declared variables.
 * Built by the composition root after the runs, which run its tasks.
 */
import type { DataSource } from 'typeorm';
import type { ConfigurationService } from '../configurations/configuration.service';
import type { IdentifierLock } from '../db/identifier-lock';
import type { PromptHistoryService } from '../prompt-history/prompt-history.service';
import { VersionPins } from '../prompt-history/version-pins';
import type { RunReader, RunService } from '../runs';
import { TaskRepository } from './task.repository';
import { TaskService } from './task.service';

export type { RenderedTask, TaskRecord, TaskRelease, TaskRunRequest, TaskRunResult, TaskService, TaskWrite } from './task.service';

export interface TasksFeatureDeps {
  dataSource: DataSource;
  identifiers: IdentifierLock;
  configurations: ConfigurationService;
  runs: RunService;
  reader: RunReader;
  history: PromptHistoryService;
}

export function createTasksFeature(deps: TasksFeatureDeps): TaskService {
  return new TaskService(deps.dataSource, deps.identifiers, new TaskRepository(deps.dataSource), deps.configurations, deps.runs, deps.reader, deps.history, new VersionPins(deps.dataSource, deps.history, deps.identifiers));
}
