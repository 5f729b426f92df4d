import { AsyncLocalStorage } from 'node:async_hooks';
import type { PendingCall } from './pending-call';

/**
 * The call a builtin is running for. The builtins are built once per service, so per-dispatch
 * facts a builtin needs mid-run (the tenant and profile whose domain rules http_fetch checks before
 * every connection) travel in async-local storage rather than rebuilding tools per call.
 */
export const callScope = new AsyncLocalStorage<PendingCall>();
