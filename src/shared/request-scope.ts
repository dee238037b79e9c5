import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What the whole of one request's work may need to know about the request
 * without being handed it: the request id, and the API key that
 * authenticated it (audit entries record it as the actor's means).
 */
export interface RequestScope {
  requestId: string;
  apiKeyId: string | null;
  /** Set when the request's writes queued webhook deliveries (the Workers entry sends them after the answer). */
  webhooksQueued?: boolean;
}

const storage = new AsyncLocalStorage<RequestScope>();

export function runInRequestScope<T>(scope: RequestScope, fn: () => Promise<T>): Promise<T> {
  return storage.run(scope, fn);
}

export function currentRequestScope(): RequestScope | undefined {
  return storage.getStore();
}
