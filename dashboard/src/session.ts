import { useEffect, useState } from 'preact/hooks';
import { api, ApiFailure } from './api.ts';

export interface User {
  id: string;
  email: string;
  name: string;
}
export interface Workspace {
  id: string;
  name: string;
  plan: string;
  role: string | null;
  personal: boolean;
}

/** Who is signed in and which workspace the pages act on (remembered in localStorage). */
interface SessionState {
  status: 'loading' | 'signed-out' | 'signed-in';
  user?: User;
  workspaces: Workspace[];
  workspaceId?: string;
}

const WORKSPACE_KEY = 'gs.workspaceId';
let state: SessionState = { status: 'loading', workspaces: [] };
const listeners = new Set<() => void>();

function set(next: SessionState): void {
  state = next;
  if (next.workspaceId) localStorage.setItem(WORKSPACE_KEY, next.workspaceId);
  for (const listener of listeners) listener();
}

export function useSession(): SessionState {
  const [, setTick] = useState(0);
  useEffect(() => {
    const update = () => setTick((n) => n + 1);
    listeners.add(update);
    return () => listeners.delete(update);
  }, []);
  return state;
}

export function currentWorkspaceId(): string {
  if (!state.workspaceId) throw new ApiFailure(0, 'no_workspace', 'Pick a workspace first.');
  return state.workspaceId;
}

/** Reads the profile and workspaces; a 401 means signed out. */
export async function refreshSession(preferWorkspaceId?: string): Promise<void> {
  try {
    const user = await api<User>('GET', '/v1/me');
    const page = await api<{ data: Workspace[] }>('GET', '/v1/workspaces', { query: { limit: 100 } });
    const remembered = preferWorkspaceId ?? localStorage.getItem(WORKSPACE_KEY) ?? undefined;
    const chosen = page.data.find((w) => w.id === remembered) ?? page.data[0];
    set({ status: 'signed-in', user, workspaces: page.data, workspaceId: chosen?.id });
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 401) set({ status: 'signed-out', workspaces: [] });
    else throw error;
  }
}

window.addEventListener('gs:signed-out', () => {
  if (state.status === 'signed-in') set({ status: 'signed-out', workspaces: [] });
});

export function chooseWorkspace(id: string): void {
  set({ ...state, workspaceId: id });
}

export async function signOut(): Promise<void> {
  try {
    await api('POST', '/v1/auth/logout');
  } finally {
    localStorage.removeItem(WORKSPACE_KEY);
    set({ status: 'signed-out', workspaces: [] });
  }
}
