import { AsyncLocalStorage } from 'node:async_hooks';
import type { ToolRef } from '@toolgate/contracts';
import type { PendingCall } from './pending-call';

/**
 * The call a builtin is running for. The builtins are built once per service, so per-dispatch
 * facts a builtin needs mid-run (the tenant and profile whose domain rules http_fetch checks before
 * every connection) travel in async-local storage rather than rebuilding tools per call.
 */
export const callScope = new AsyncLocalStorage<PendingCall>();

/**
 * The builtin a script tool's host call runs (`http_get` runs `http_fetch`), while it runs: its
 * connections pass the domain rules of that builtin as well as the script's own — a rule scoped
 * to `http_fetch`, or to its risk, holds whoever calls it.
 */
export const hostToolScope = new AsyncLocalStorage<ToolRef>();
