/**
 * A subprocess or container tool whose stdout nests thousands of levels deep — its result, or its
 * declared error's details — settles at once as `non-serializable-result`, with real NATS, real
 * bubblewrap and real runc. `JSON.parse` takes such a value, but encoding the settlement overflows
 * the stack: appended as it was, every retry failed the same way, and the call stayed `started`
 * with its message in flight for good. And a settlement that cannot be encoded, whatever produced
 * it, settles as an error instead of being retried.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { JournalPublisher } from '@toolgate/bus';
import {
  MAX_JSON_DEPTH,
  type ExecutorKind,
  type SettledEvent,
  type ToolRef,
} from '@toolgate/contracts';
import { ToolRegistry } from '@toolgate/registry';
import { eventually, testJournalKeys, useTestNats, type TestNats } from '@toolgate/testing';
import {
  commandDirs,
  dispatch,
  journalCounts,
  registerCommandTool,
  startReplica,
  TENANT,
  type CommandDirs,
  type Replica,
} from '../../test/executor-harness';
import type { CallExecutor } from '../execution/call-executor';
import { ToolRunner } from '../execution/tool-runner';

/** Deep enough that `JSON.stringify` of the settlement overflows the stack. */
const DEPTH = 5000;
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

/** Well within the time a settlement takes on a busy machine; a hung call never gets there. */
const PROMPTLY_MS = 30_000;

let t: TestNats;
let publisher: JournalPublisher;
let registry: ToolRegistry;
let dirs: CommandDirs;
const replicas: Replica[] = [];

beforeAll(async () => {
  t = await useTestNats('deepresult');
  publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  registry = await ToolRegistry.open(t.nc, t.subjects);
  dirs = await commandDirs('deepresult');
  await fs.writeFile(path.join(dirs.work, 'deep.json'), nested(DEPTH));
  await fs.writeFile(
    path.join(dirs.work, 'deep-error.json'),
    `{"error":{"code":"model-retry","message":"x","details":{"d":${nested(DEPTH)}}}}`,
  );
});

afterEach(async () => {
  await Promise.all(replicas.splice(0).map((r) => r.stop()));
});

afterAll(async () => {
  registry?.stop();
  await t?.cleanup();
  await dirs?.remove();
});

/** A replica serving subprocess tools and runc containers in the call directory. */
async function replica(): Promise<Replica> {
  const started = await startReplica(t, dirs.runcEnv, dirs.work);
  replicas.push(started);
  return started;
}

/** Registers a tool running `argv` under `executor`; its reference as a dispatch records it. */
function commandTool(
  executor: 'subprocess' | 'container',
  name: string,
  argv: string[],
): Promise<ToolRef> {
  return registerCommandTool(
    registry,
    {
      name,
      description: 'Prints what a file of the call directory holds.',
      parameters: { type: 'object', properties: {} },
      policy: {
        executor,
        risk: 'read',
        needsApproval: false,
        command: { argv },
        ...(executor === 'container' ? { container: { image: 'tools/busybox:1' } } : {}),
      },
    },
    10_000,
  );
}

function settledOf(run: string, dispatchId: string): Promise<SettledEvent> {
  return eventually(async () => (await publisher.last(TENANT, run, dispatchId, 'settled'))?.event, {
    timeoutMs: PROMPTLY_MS,
    intervalMs: 50,
    what: `${dispatchId} settled`,
  });
}

/** Waits until the replica holds no message any more: every call it took was settled and acked. */
async function nothingInFlight(r: Replica): Promise<void> {
  await eventually(() => (r.inFlight().length === 0 ? true : undefined), {
    timeoutMs: 5_000,
    what: `no message in flight (${JSON.stringify(r.inFlight())})`,
  });
}

const tooDeep = `nested deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`;

describe.each(['subprocess', 'container'] as const)('a %s tool', (executor) => {
  it(`whose result or error details nest ${DEPTH} deep settles non-serializable-result at once`, async () => {
    const run = `run-deep-${executor}`;
    const r = await replica();
    const deep = await commandTool(executor, `cat_deep_${executor}`, ['/bin/cat', 'deep.json']);
    const failing = await commandTool(executor, `fail_deep_${executor}`, [
      '/bin/sh',
      '-c',
      'cat deep-error.json; exit 1',
    ]);
    const control = await commandTool(executor, `cat_small_${executor}`, ['/bin/echo', '{"ok":1}']);
    await Promise.all([
      dispatch(publisher, run, `${run}-result`, deep, {}),
      dispatch(publisher, run, `${run}-details`, failing, {}),
      dispatch(publisher, run, `${run}-control`, control, {}),
    ]);

    const [result, details, ok] = await Promise.all([
      settledOf(run, `${run}-result`),
      settledOf(run, `${run}-details`),
      settledOf(run, `${run}-control`),
    ]);
    expect(result).toMatchObject({
      outcome: 'error',
      error: {
        code: 'non-serializable-result',
        message: `${deep.name} wrote JSON to stdout ${tooDeep}`,
      },
    });
    expect(details).toMatchObject({
      outcome: 'error',
      error: {
        code: 'non-serializable-result',
        message: `${failing.name} wrote an error with details ${tooDeep}`,
      },
    });
    expect(ok).toMatchObject({ outcome: 'ok', result: { ok: 1 } });
    for (const id of ['result', 'details', 'control']) {
      expect(await journalCounts(t, run, `${run}-${id}`)).toMatchObject({ started: 1, settled: 1 });
    }
    await nothingInFlight(r);
  }, 90_000);
});

it('a settlement that cannot be encoded settles as an error instead of being retried', async () => {
  const run = 'run-unencodable';
  const id = `${run}-d1`;
  const r = await replica();
  // No executor answers such a value any more: a stand-in does, as one that missed the check would.
  const unencodable: CallExecutor = {
    run: async () => ({ ok: true, result: JSON.parse(nested(DEPTH)) as unknown }),
  };
  const runner = r.app.get(ToolRunner) as unknown as {
    options: { executors: Partial<Record<ExecutorKind, CallExecutor>> };
  };
  runner.options.executors.subprocess = unencodable;
  const ref = await commandTool('subprocess', 'unencodable', ['/bin/true']);
  await dispatch(publisher, run, id, ref, {});

  expect(await settledOf(run, id)).toMatchObject({
    outcome: 'error',
    error: {
      code: 'non-serializable-result',
      message: 'the call ended, but its outcome could not be encoded as JSON',
      details: { retryable: false },
    },
  });
  expect(await journalCounts(t, run, id)).toMatchObject({ started: 1, settled: 1 });
  await nothingInFlight(r);
}, 90_000);
