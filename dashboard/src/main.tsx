import { render } from 'preact';
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import { messageOf } from './api.ts';
import { navigate, usePath } from './router.ts';
import { chooseWorkspace, refreshSession, signOut, useSession } from './session.ts';
import { ErrorBox, Link } from './ui.tsx';
import { LoginPage, SignUpPage } from './pages/auth.tsx';
import { WorkspacesPage } from './pages/workspaces.tsx';
import { KeysPage } from './pages/keys.tsx';
import { PlaygroundPage } from './pages/playground.tsx';
import { GenerationPage, GenerationsPage } from './pages/generations.tsx';
import { AssetsPage } from './pages/assets.tsx';
import { WebhooksPage } from './pages/webhooks.tsx';
import { UsagePage } from './pages/usage.tsx';
import { BudgetBanner } from './pages/budgets.tsx';
import { ProviderHealthPage } from './pages/provider-health.tsx';

const NAV: Array<[path: string, label: string]> = [
  ['/', 'Usage'],
  ['/playground', 'Playground'],
  ['/generations', 'Generations'],
  ['/assets', 'Assets'],
  ['/keys', 'API keys'],
  ['/webhooks', 'Webhooks'],
  ['/workspaces', 'Workspaces'],
  ['/provider-health', 'Provider health'],
];

const TITLES: Record<string, string> = {
  '/': 'Usage',
  '/playground': 'Playground',
  '/generations': 'Generations',
  '/assets': 'Assets',
  '/keys': 'API keys',
  '/webhooks': 'Webhooks',
  '/workspaces': 'Workspaces',
  '/provider-health': 'Provider health',
  '/login': 'Log in',
  '/signup': 'Sign up',
};

function Page({ path }: { path: string }) {
  const generation = /^\/generations\/([^/]+)$/.exec(path);
  if (generation) return <GenerationPage id={decodeURIComponent(generation[1]!)} />;
  switch (path) {
    case '/':
      return <UsagePage />;
    case '/playground':
      return <PlaygroundPage />;
    case '/generations':
      return <GenerationsPage />;
    case '/assets':
      return <AssetsPage />;
    case '/keys':
      return <KeysPage />;
    case '/webhooks':
      return <WebhooksPage />;
    case '/workspaces':
      return <WorkspacesPage />;
    case '/provider-health':
      return <ProviderHealthPage />;
    default:
      return (
        <main>
          <h1>Not found</h1>
          <p>
            There is no page at {path}. <Link href="/">Go to the dashboard</Link>.
          </p>
        </main>
      );
  }
}

function App() {
  const path = usePath();
  const session = useSession();
  const [failure, setFailure] = useState<unknown>();
  useEffect(() => {
    refreshSession().catch(setFailure);
  }, []);
  useEffect(() => {
    const title = /^\/generations\/./.test(path) ? 'Generation' : (TITLES[path] ?? 'Dashboard');
    document.title = `${title} · Generation Service`;
  }, [path]);
  // A layout effect: the address changes in the same turn as the page it names is drawn, never after it.
  useLayoutEffect(() => {
    if (session.status === 'signed-out' && path !== '/login' && path !== '/signup') navigate('/login', true);
    if (session.status === 'signed-in' && (path === '/login' || path === '/signup')) navigate('/', true);
  }, [session.status, path]);

  if (failure)
    return (
      <main class="narrow">
        <h1>Generation Service</h1>
        <ErrorBox error={failure} />
        <button type="button" onClick={() => location.reload()}>
          Try again
        </button>
      </main>
    );
  if (session.status === 'loading')
    return (
      <main class="narrow">
        <p role="status">Loading…</p>
      </main>
    );
  if (session.status === 'signed-out') return path === '/signup' ? <SignUpPage /> : <LoginPage />;
  if (path === '/login' || path === '/signup') return null;

  return (
    <>
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top">
        <strong class="brand">Generation Service</strong>
        <nav aria-label="Main">
          <ul>
            {NAV.map(([href, label]) => {
              const current = href === '/' ? path === '/' : path === href || path.startsWith(`${href}/`);
              return (
                <li key={href}>
                  <Link href={href} aria-current={current ? 'page' : undefined}>
                    {label}
                  </Link>
                </li>
              );
            })}
          </ul>
        </nav>
        <div class="account">
          <label class="sr-only" for="workspace-picker">
            Workspace
          </label>
          <select id="workspace-picker" value={session.workspaceId} onChange={(event) => chooseWorkspace((event.currentTarget as HTMLSelectElement).value)}>
            {session.workspaces.map((workspace) => (
              <option key={workspace.id} value={workspace.id}>
                {workspace.name}
              </option>
            ))}
          </select>
          <span class="muted small" title={session.user?.email}>
            {session.user?.name}
          </span>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              signOut().catch((error) => alert(messageOf(error)));
            }}
          >
            Log out
          </button>
        </div>
      </header>
      <div id="content" tabIndex={-1}>
        {session.workspaceId && <BudgetBanner key={`${session.workspaceId} ${path}`} workspaceId={session.workspaceId} />}
        {session.workspaceId ? (
          <Page key={`${session.workspaceId} ${path}`} path={path} />
        ) : (
          <main>
            <h1>No workspace</h1>
            <p>You belong to no workspace yet.</p>
            <WorkspacesPage />
          </main>
        )}
      </div>
    </>
  );
}

render(<App />, document.getElementById('app')!);
