import { Worker } from 'node:worker_threads';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { FILE_OPS_SOURCE } from './file-helper-program';
import type { CallBounds, HelperReply } from './file-scope-pool';

type RunOp = (op: string, args: object) => HelperReply;

let runOpInline: RunOp | undefined;

/** The helper program's `runOp`, evaluated once in this process (only when the sandbox is off). */
function inline(): RunOp {
  runOpInline ??= new Function('require', `${FILE_OPS_SOURCE}\nreturn runOp;`)(require) as RunOp;
  return runOpInline;
}

/**
 * A worker thread's program: the same ops, one request, one reply. The reply crosses as JSON text,
 * as from a helper: parsed here, its objects are this realm's plain objects (a structured clone's
 * are the main realm's, which a jest module context does not take for plain JSON).
 */
const WORKER_PROGRAM = `${FILE_OPS_SOURCE}
const { parentPort, workerData } = require('node:worker_threads');
parentPort.postMessage(JSON.stringify(runOp(workerData.op, workerData.args)));
`;

/**
 * Runs one file operation of the helper program in the executor's process (EXECUTOR_SANDBOX=off):
 * the same code and answers as in the scope sandbox, with the path checks as the only boundary.
 * A call with a deadline (grep: a model-written regex can backtrack without end) runs in a worker
 * thread, terminated on the deadline or on abort; the others run inline, bounded by their caps.
 */
export async function runFileOpInProcess(
  op: string,
  args: object,
  bounds: CallBounds,
): Promise<HelperReply> {
  const cancelled = () => new ToolgateError(ErrorCode.Cancelled, `${bounds.tool} was cancelled`);
  if (bounds.signal.aborted) throw cancelled();
  if (!bounds.timeout) return inline()(op, args);
  const { ms, error } = bounds.timeout;
  const worker = new Worker(WORKER_PROGRAM, { eval: true, workerData: { op, args } });
  let onAbort: (() => void) | undefined;
  let deadline: NodeJS.Timeout | undefined;
  try {
    return await new Promise<HelperReply>((resolve, reject) => {
      worker.once('message', (reply: string) => resolve(JSON.parse(reply) as HelperReply));
      worker.once('error', () =>
        reject(new ToolgateError(ErrorCode.ToolFailed, `${bounds.tool}: the worker failed`)),
      );
      deadline = setTimeout(() => reject(error()), ms);
      onAbort = () => reject(cancelled());
      bounds.signal.addEventListener('abort', onAbort, { once: true });
    });
  } finally {
    clearTimeout(deadline);
    if (onAbort) bounds.signal.removeEventListener('abort', onAbort);
    void worker.terminate();
  }
}
