import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { messageOf } from './api.ts';
import { onLinkClick } from './router.ts';

export function Link(props: { href: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' | undefined }) {
  return (
    <a href={props.href} class={props.class} aria-current={props['aria-current']} onClick={onLinkClick}>
      {props.children}
    </a>
  );
}

/** An error from the API (the envelope's message) or from the browser, announced to screen readers. */
export function ErrorBox({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p class="error" role="alert">
      {messageOf(error)}
    </p>
  );
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {children}
    </p>
  );
}

/** Loads data when its inputs change; `reload` runs it again. */
export function useLoad<T>(load: () => Promise<T>, inputs: unknown[]): { data: T | undefined; error: unknown; loading: boolean; reload: () => void } {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((previous) => ({ ...previous, loading: true }));
    load().then(
      (data) => {
        if (live) setState({ data, error: undefined, loading: false });
      },
      (error) => {
        if (live) setState({ data: undefined, error, loading: false });
      },
    );
    return () => {
      live = false;
    };
  }, [...inputs, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { ...state, reload };
}

export function StatusBadge({ status }: { status: string }) {
  return (
    <span class={`badge badge-${status}`} data-status={status}>
      {status}
    </span>
  );
}

export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MB`;
  return `${Number((n / 1024 ** 3).toFixed(1))} GB`;
}
