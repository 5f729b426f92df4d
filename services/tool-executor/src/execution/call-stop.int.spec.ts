/**
 * A running call is stopped — its whole process tree, not just the process the executor started —
 * at its deadline and when its replica's stop gives up at the drain cap, with real NATS, real
 * bubblewrap and real runc. The tool forks a grandchild in a session of its own (out of reach of a
 * process-group kill) that appends to a marker file every 50 ms; what is left of it is read from
 * /proc. An abandoned call is handed back unsettled and runs again on another replica, which never
 * sees the first run's grandchild still writing.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { JournalPublisher } from '@toolgate/bus';
import type { SettledEvent, ToolRef } from '@toolgate/contracts';
import { ToolRegistry } from '@toolgate/registry';
import { drainWithin } from '@toolgate/service-kit';
import { eventually, testJournalKeys, useTestNats, type TestNats } from '@toolgate/testing';
import {
  commandDirs,
  dispatch,
  journalCounts,
  registerCommandTool,
  registerRemoteTool,
  serveCountingTool,
  sleep,
  startReplica,
  TENANT,
  type CommandDirs,
  type Replica,
} from '../../test/executor-harness';

/**
 * The tool: on its first run for a marker it starts the grandchild (setsid: a session and process
 * group of its own) and sleeps; on a later run it reports whether the marker still grows.
 */
const STOPPER =
  'm=$1; ' +
  'if [ -e "$m.started" ]; then ' +
  's1=$(wc -c < "$m"); sleep 0.4; s2=$(wc -c < "$m"); ' +
  'printf \'{"before":%d,"after":%d}\' "$s1" "$s2"; exit 0; fi; ' +
  'touch "$m.started"; ' +
  'setsid sh -c \'while :; do echo x >> "$0"; sleep 0.05; done\' "$m" & ' +
  'sleep 600';

const PARAMS = {
  type: 'object',
  properties: { name: { type: 'string' } },
  required: ['name'],
};

let t: TestNats;
let publisher: JournalPublisher;
let registry: ToolRegistry;
let dirs: CommandDirs;
const replicas: Replica[] = [];
let n = 0;

beforeAll(async () => {
  t = await useTestNats('callstop');
  publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
  registry = await ToolRegistry.open(t.nc, t.subjects);
  dirs = await commandDirs('callstop');
});

afterEach(async () => {
  await Promise.all(replicas.splice(0).map((r) => r.stop()));
});

afterAll(async () => {
  registry?.stop();
  await t?.cleanup();
  await dirs?.remove();
});

/**
 * A replica serving subprocess tools (and runc containers) in the call directory, with a 1 s ack wait; or,
 * `remoteOnly`, one with neither its sandbox nor runc (their probes and helpers) for remote calls.
 */
async function replica(
  env: Record<string, string> = {},
  { remoteOnly = false } = {},
): Promise<Replica> {
  const started = await startReplica(
    t,
    remoteOnly ? { EXECUTOR_SANDBOX: 'off', ...env } : { ...dirs.runcEnv, ...env },
    dirs.work,
  );
  replicas.push(started);
  return started;
}

/** Registers the stopper tool for `executor` and returns its reference as a dispatch records it. */
async function stopperTool(
  executor: 'subprocess' | 'container',
  timeoutMs?: number,
): Promise<ToolRef> {
  const name = `stopper_${executor}_${++n}`;
  return registerCommandTool(
    registry,
    {
      name,
      description: 'Starts a grandchild that writes a marker, then sleeps.',
      parameters: PARAMS,
      policy: {
        executor,
        risk: 'write',
        needsApproval: false,
        command: { argv: ['/bin/sh', '-c', STOPPER, name, { input: 'name' }] },
        ...(executor === 'container' ? { container: { image: 'tools/busybox:1' } } : {}),
      },
    },
    timeoutMs,
  );
}

/**
 * The host processes of a call: those whose environment carries its dispatch id (the tool, its
 * children, the grandchild's `sleep`s) or whose command line names its marker (bubblewrap, the
 * shells). Zombies have neither and are not counted: they run nothing.
 */
async function processesOf(dispatchId: string, marker: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    const [cmdline, environ] = await Promise.all([
      fs.readFile(`/proc/${pid}/cmdline`, 'latin1').catch(() => ''),
      fs.readFile(`/proc/${pid}/environ`, 'latin1').catch(() => ''),
    ]);
    const env = environ.split('\0');
    if (cmdline.split('\0').includes(marker) || env.includes(`TOOLGATE_DISPATCH_ID=${dispatchId}`))
      found.push(`${pid} ${cmdline.replace(/\0/g, ' ').slice(0, 80)}`);
  }
  return found;
}

const markerSize = (marker: string) =>
  fs.stat(path.join(dirs.work, marker)).then(
    (s) => s.size,
    () => -1,
  );

/** Waits until the marker has grown past `bytes` (the grandchild is running). */
async function markerGrowing(marker: string, bytes = 20): Promise<void> {
  await eventually(async () => ((await markerSize(marker)) > bytes ? true : undefined), {
    timeoutMs: 20_000,
    what: `${marker} to grow`,
  });
}

/** Whether the marker stays the same size over a few of the grandchild's 50 ms periods. */
async function markerStill(marker: string): Promise<{ before: number; after: number }> {
  const before = await markerSize(marker);
  await sleep(400);
  return { before, after: await markerSize(marker) };
}

async function settledOf(run: string, dispatchId: string): Promise<SettledEvent> {
  return eventually(async () => (await publisher.last(TENANT, run, dispatchId, 'settled'))?.event, {
    timeoutMs: 30_000,
    intervalMs: 50,
    what: `${dispatchId} settled`,
  });
}

const drainCapped = (r: Replica) => drainWithin(r, { capMs: 300, log: () => undefined });

describe.each(['subprocess', 'container'] as const)('a %s call', (executor) => {
  it('is killed with its whole tree at the drain cap, handed back unsettled, and runs once more elsewhere', async () => {
    const run = `run-drain-${executor}`;
    const id = `${run}-d1`;
    const marker = `marker-${id}`;
    const stopping = await replica();
    const ref = await stopperTool(executor);
    await dispatch(publisher, run, id, ref, { name: marker });
    await markerGrowing(marker);
    // The tool and its grandchild (in a session of its own) at least.
    const tree = await processesOf(id, marker);
    expect(tree.length).toBeGreaterThanOrEqual(2);

    // Another replica is up before the stop: the handed-back message goes to it at once.
    await replica();
    expect(await drainCapped(stopping)).toBe('capped');
    // The stop returned: nothing of the tree is left, and the marker no longer grows. (The
    // second run, on the other replica, may have started already: its processes are not the
    // first run's — none of those seen before, nor the grandchild's loop or the tool's sleep.)
    const left = await processesOf(id, marker);
    expect(
      left.filter((p) => tree.includes(p) || p.includes('while :') || p.includes('sleep 600')),
    ).toEqual([]);
    const still = await markerStill(marker);
    expect(still.after).toBe(still.before);

    // The second run (on the other replica) saw the marker stand still from its start: the
    // first run's tree was dead before the message was handed back.
    const settled = await settledOf(run, id);
    expect(settled.outcome).toBe('ok');
    // A later delivery than the first (the stopping replica's last pull may hand it back once
    // more on its way out: 3).
    expect(settled.attempt).toBeGreaterThanOrEqual(2);
    const { before, after } = settled.result as { before: number; after: number };
    expect(after).toBe(before);
    // Settled once, by the second delivery; two claims: the abandoned one and the takeover.
    expect(await journalCounts(t, run, id)).toMatchObject({ started: 2, settled: 1 });
  }, 90_000);

  it('is killed with its whole tree at its deadline, and settles timeout', async () => {
    const run = `run-deadline-${executor}`;
    const id = `${run}-d1`;
    const marker = `marker-${id}`;
    await replica();
    await dispatch(publisher, run, id, await stopperTool(executor, 4_000), { name: marker });
    // The tree, seen while it runs: polled from the start, not after a wait the deadline may
    // already have ended on a busy machine.
    // (The tool and its grandchild at least; `eventually` fails the test when never seen.)
    await eventually(
      async () =>
        (await processesOf(id, marker)).length >= 2 && (await markerSize(marker)) > 20
          ? true
          : undefined,
      { timeoutMs: 20_000, intervalMs: 50, what: `${id}'s tree running` },
    );

    const settled = await settledOf(run, id);
    expect(settled).toMatchObject({ outcome: 'error', error: { code: 'timeout' } });
    // Settled only once nothing of it runs any more.
    expect(await processesOf(id, marker)).toEqual([]);
    const still = await markerStill(marker);
    expect(still.after).toBe(still.before);
  }, 90_000);
});

it('a call waiting for a slot past its deadline settles timeout without ever starting', async () => {
  const run = 'run-slot';
  const holder = `${run}-holder`;
  const waiter = `${run}-waiter`;
  // One slot: the holder's tool takes it for its whole (long) deadline.
  const stopping = await replica({ EXECUTOR_INPROCESS_CONCURRENCY: '1' });
  await dispatch(publisher, run, holder, await stopperTool('subprocess', 60_000), {
    name: `marker-${holder}`,
  });
  await markerGrowing(`marker-${holder}`);
  await dispatch(publisher, run, waiter, await stopperTool('subprocess', 1_500), {
    name: `marker-${waiter}`,
  });

  const settled = await settledOf(run, waiter);
  expect(settled).toMatchObject({
    outcome: 'error',
    error: { code: 'timeout', message: expect.stringMatching(/did not finish within 1500 ms/) },
  });
  // Its tool never ran: it would have created its marker's `.started` first thing.
  await expect(fs.access(path.join(dirs.work, `marker-${waiter}.started`))).rejects.toThrow();
  expect(await publisher.last(TENANT, run, holder, 'settled')).toBeNull();
  // The holder is still running; the stop's cap kills it.
  expect(await drainCapped(stopping)).toBe('capped');
  expect(await processesOf(holder, `marker-${holder}`)).toEqual([]);
}, 90_000);

it('a remote call at the drain cap stops waiting, is handed back unsettled and sent once more', async () => {
  const run = 'run-remote';
  const id = `${run}-d1`;
  // The first request is never answered (a worker still at it); the second one is.
  const worker = serveCountingTool(t, publisher, 'remote_stopper', (_input, execution) =>
    execution === 1 ? undefined : { ok: true, result: { execution } },
  );
  try {
    const stopping = await replica({}, { remoteOnly: true });
    await dispatch(publisher, run, id, await registerRemoteTool(t, 'remote_stopper', 60_000), {});
    await eventually(() => (worker.total() === 1 ? true : undefined), { what: 'the first send' });
    await replica({}, { remoteOnly: true });
    expect(await drainCapped(stopping)).toBe('capped');
    const settled = await settledOf(run, id);
    expect(settled).toMatchObject({ outcome: 'ok', result: { execution: 2 } });
    // The worker was not told: it got the call twice (the documented limit), it settled once.
    expect(worker.executions.get(id)).toBe(2);
    expect(await journalCounts(t, run, id)).toMatchObject({ started: 2, settled: 1 });
  } finally {
    worker.stop();
  }
}, 90_000);
