import { AsyncLocalStorage } from 'node:async_hooks';

/** The request being served, visible to everything it calls (log lines carry its id). */
export const requestScope = new AsyncLocalStorage<{ requestId: string }>();
