/**
 * The light entry of the console: the landing page and the run pages. It
 * must never import the playground (GraphiQL and its editor): a run page
 * stays small enough to open quickly on any connection.
 */
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { SignInGate } from '../shared/sign-in';
import { Layout } from '../shared/layout';
import { Landing } from './landing';
import { RunPage } from './run-page';
import { RunPlayground } from './run-playground';
import { RunsList } from './runs-list';
import { TaskPage } from './task-page';
import { TasksList } from './tasks-list';
import { UsagePage } from './usage-page';
import { ChatPage, ChatStart } from './chat-page';
import '../shared/console.css';

function route(pathname: string) {
  const path = pathname.replace(/\/+$/, '') || '/';
  if (path === '/runs') return { title: 'Runs', page: <RunsList /> };
  if (path === '/runs/new') return { title: 'New run', page: <RunPlayground /> };
  if (path === '/usage') return { title: 'Usage', page: <UsagePage /> };
  if (path === '/chat') return { title: 'Chat', page: <ChatStart /> };
  const chat = /^\/chat\/([^/]+)$/.exec(path);
  if (chat) return { title: 'Chat', page: <ChatPage id={decodeURIComponent(chat[1]!)} /> };
  const run = /^\/runs\/([^/]+)$/.exec(path);
  if (run) return { title: 'Run', page: <RunPage id={decodeURIComponent(run[1]!)} /> };
  if (path === '/tasks') return { title: 'Tasks', page: <TasksList /> };
  const task = /^\/tasks\/([^/]+)$/.exec(path);
  if (task) return { title: 'Task', page: <TaskPage identifier={decodeURIComponent(task[1]!)} /> };
  return { title: 'promptwire', page: <Landing /> };
}

const { title, page } = route(window.location.pathname);
document.title = title === 'promptwire' ? title : `${title} · promptwire`;

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <SignInGate>
      <Layout>{page}</Layout>
    </SignInGate>
  </StrictMode>,
);
