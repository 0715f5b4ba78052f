import { useEffect, useState } from 'react';
import { TasksDocument, type TasksQuery } from '../../../src/client';
import { request } from '../shared/session';

/** nr_llm's task categories, in its order. */
export const TASK_CATEGORIES = ['log_analysis', 'content', 'system', 'developer', 'general'] as const;

type TaskRow = TasksQuery['tasks'][number];

/** The category the list is filtered by, kept in the address (`/tasks?category=content`) so a filtered list can be linked. */
function categoryFromAddress(): string {
  return new URLSearchParams(window.location.search).get('category') ?? '';
}

/** The tasks (nr_llm's order: category, sorting, name), filtered by category. */
export function TasksList() {
  const [category, setCategory] = useState(categoryFromAddress);
  const [tasks, setTasks] = useState<TaskRow[] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);

  useEffect(() => {
    let current = true;
    setTasks(null);
    request(TasksDocument, { category: category === '' ? null : category, limit: 100 })
      .then((data) => {
        if (!current) return;
        setTasks(data.tasks);
        setProblem(null);
      })
      .catch((error: Error) => current && setProblem(error.message));
    return () => {
      current = false;
    };
  }, [category]);

  const choose = (next: string) => {
    const url = new URL(window.location.href);
    if (next === '') url.searchParams.delete('category');
    else url.searchParams.set('category', next);
    window.history.replaceState(null, '', url);
    setCategory(next);
  };

  return (
    <section>
      <div className="title-row">
        <h1>Tasks</h1>
        <label className="inline">
          Category{' '}
          <select data-field="category" value={category} onChange={(event) => choose(event.target.value)}>
            <option value="">all</option>
            {TASK_CATEGORIES.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
      </div>
      <p className="muted">Named prompt templates with declared variables, run by name. Open one to edit it, preview exactly what it sends, and try it.</p>
      {problem && <p className="problem">{problem}</p>}
      {tasks === null ? (
        !problem && <p className="muted">Loading…</p>
      ) : tasks.length === 0 ? (
        <p className="muted" data-tasks-empty>
          No tasks{category === '' ? '' : ` in ${category}`}. Create them with the <code>createTask</code> mutation in the <a href="/playground">playground</a>.
        </p>
      ) : (
        <table className="runs tasks">
          <thead>
            <tr>
              <th>Name</th>
              <th>Identifier</th>
              <th>Category</th>
              <th>Output</th>
              <th>Configuration</th>
              <th>Variables</th>
            </tr>
          </thead>
          <tbody>
            {tasks.map((task) => (
              <tr key={task.uid} data-task={task.identifier} data-category={task.category}>
                <td>
                  <a href={`/tasks/${encodeURIComponent(task.identifier)}`}>{task.name}</a>
                  {!task.isActive && <span className="tag">inactive</span>}
                  {task.hidden && <span className="tag">hidden</span>}
                </td>
                <td>
                  <code>{task.identifier}</code>
                </td>
                <td>{task.category}</td>
                <td>
                  {task.outputFormat}
                  {task.outputSchema !== null && <span className="tag">schema</span>}
                </td>
                <td>{task.configuration ?? <span className="muted">default</span>}</td>
                <td>{task.variables.map((variable) => variable.name).join(', ')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
