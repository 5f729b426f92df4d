// Docker HEALTHCHECK for every Toolgate service in the one image (the slim base has no curl).
// The service's port is whichever of the services' port variables is set; compose sets each.
'use strict';
const port =
  process.env.TOOLGATE_HEALTH_PORT ||
  process.env.GATEWAY_PORT ||
  process.env.EVALUATOR_PORT ||
  process.env.EXECUTOR_PORT ||
  process.env.JOURNAL_PORT ||
  process.env.WORKTREE_PORT ||
  '8080';
fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2500) }).then(
  (res) => process.exit(res.ok ? 0 : 1),
  () => process.exit(1),
);
