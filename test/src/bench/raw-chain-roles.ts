import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import { connect, headers, type Msg, type MsgHdrs } from '@nats-io/transport-node';
import {
  createSubjects,
  generateKeySet,
  ServiceKeys,
  signToolRequest,
  type KeySet,
} from '@toolgate/contracts';
import { NATS_URL } from '@toolgate/testing';
import { REPO_ROOT } from '../support/process-stack';
import { sampleCall } from './signing';
import { BENCH_CONNECTION, withTimeout } from './stats';

/**
 * The raw chain's roles (see `openChain` in raw-chain.ts), each on a connection of its own: in the
 * bench's process, or each in a process of its own as the split shape runs Toolgate's services.
 * The client and the tool's worker stay with the caller, as the split's load generator and worker
 * stay in the bench's process.
 */
export const ROLES = ['gateway', 'evaluator', 'executor', 'projection'] as const;
export type Role = (typeof ROLES)[number];

export type ChainEvent = 'requested' | 'decided' | 'started' | 'settled';

/** Stand-in payload of the raw chain's events, requests and replies. */
export const PAYLOAD = new Uint8Array(400).fill(0x61);

/**
 * The work every dispatch does on its path that the raw chain does not, and nothing else: each
 * event signed by its producer (Toolgate's own {@link ServiceKeys}, for every reader) and verified
 * by the role that reads it, the executor's Ed25519 signature on the tool request, and the
 * gateway's read of the `settled` it heard back from the stream before it answers (a `wait` is
 * answered only with what was recorded). The events are a dispatch's own (their size is the
 * journal's). Left out: the checks of each event's shape, the policy, the other reads that decide,
 * metrics, traces, the projection's fold — so the guarded chain is a floor under a dispatch.
 */
export interface Guards {
  /** The key set the roles' keys come from (handed to a role in a process of its own). */
  set: KeySet;
  keys: Record<'gateway' | 'evaluator' | 'executor' | 'journal', ServiceKeys>;
  /** The journal subject a chain's event stands for: what its signature binds. */
  subject(id: string, type: ChainEvent): string;
  payload: Record<ChainEvent, Uint8Array>;
  toolSubject: string;
}

export function guards(set: KeySet = generateKeySet()): Guards {
  const subjects = createSubjects('bench');
  const { all } = sampleCall('noop');
  const bytes = (type: ChainEvent) =>
    new TextEncoder().encode(JSON.stringify(all.find((e) => e.type === type)));
  return {
    set,
    keys: {
      gateway: ServiceKeys.ofSet('gateway', set),
      evaluator: ServiceKeys.ofSet('permission-evaluator', set),
      executor: ServiceKeys.ofSet('tool-executor', set),
      journal: ServiceKeys.ofSet('journal', set),
    },
    subject: (id, type) => subjects.journal.event('bench', 'run-1', id, type),
    payload: {
      requested: bytes('requested'),
      decided: bytes('decided'),
      started: bytes('started'),
      settled: bytes('settled'),
    },
    toolSubject: subjects.remoteTool('bench', 'noop').subject,
  };
}

/** Where a chain runs: its stream, its subjects' root, and the guards when it is guarded. */
export interface ChainSpec {
  stream: string;
  root: string;
  guard?: Guards;
}

/** One role, connected and serving. */
export interface ServedRole {
  /** Another durable consumer on this role's connection, filtered on `events.<filter>`. */
  consume(name: string, filter: string, handle: (m: JsMsg) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

const idOf = (subject: string) => subject.split('.').at(-2)!;

/**
 * Serves `role` of the chain on a connection of its own; resolves once it consumes. A check that
 * fails (guarded chain) goes to `refuse` and leaves its chain waiting: the caller's chain reports it.
 */
export async function serveRole(
  role: Role,
  { stream, root, guard }: ChainSpec,
  refuse: (err: Error) => void,
): Promise<ServedRole> {
  const event = (id: string, type: string) => `${root}.events.${id}.${type}`;
  const nc = await connect({
    servers: NATS_URL,
    name: `bench-${stream}-${role}`,
    ...BENCH_CONNECTION,
  });
  const reading: ConsumerMessages[] = [];
  const close = async () => {
    for (const messages of reading) await messages.close().catch(() => undefined);
    await nc.close().catch(() => undefined);
  };
  try {
    const jsm = await jetstreamManager(nc);
    const consume = async (name: string, filter: string, handle: (m: JsMsg) => Promise<void>) => {
      await jsm.consumers.add(stream, {
        durable_name: `${stream}_${name}`,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: `${root}.events.${filter}`,
      });
      const consumer = await jetstream(nc).consumers.get(stream, `${stream}_${name}`);
      const messages = await consumer.consume({ max_messages: 100 });
      reading.push(messages);
      void (async () => {
        for await (const m of messages) {
          handle(m).then(
            () => m.ack(),
            () => m.nak(),
          );
        }
      })();
    };
    const append = (id: string, type: ChainEvent, signer: keyof Guards['keys']) => {
      let payload: Uint8Array = PAYLOAD;
      let signed: MsgHdrs | undefined;
      if (guard) {
        payload = guard.payload[type];
        signed = headers();
        guard.keys[signer].signEvent(guard.subject(id, type), type, payload, signed);
      }
      return jetstream(nc).publish(event(id, type), payload, {
        msgID: `${id}:${type}`,
        expect: { lastSubjectSequence: 0 },
        ...(signed ? { headers: signed } : {}),
      });
    };
    /** This role's check of a message it acts on (guarded chain); throws when it fails. */
    const verified = (
      reader: keyof Guards['keys'],
      m: { subject: string; data: Uint8Array; headers?: MsgHdrs },
    ) => {
      if (!guard) return;
      const type = m.subject.slice(m.subject.lastIndexOf('.') + 1) as ChainEvent;
      const refused = guard.keys[reader].verifyEvent(
        guard.subject(idOf(m.subject), type),
        m.data,
        m.headers,
      );
      if (refused) {
        const err = new Error(`the guarded chain's ${type} failed its check: ${refused}`);
        refuse(err);
        throw err;
      }
    };
    const lastSettled = (id: string) =>
      jsm.direct.getMessage(stream, { last_by_subj: event(id, 'settled') });

    switch (role) {
      case 'gateway': {
        // Appends `requested`, answers when the core delivery of `settled` comes (guarded: once
        // it has read it back from the stream).
        const waiting = new Map<string, Msg>();
        nc.subscribe(`${root}.events.*.settled`, {
          callback: (_err, m) => {
            const id = idOf(m.subject);
            const caller = waiting.get(id);
            waiting.delete(id);
            if (!guard) return void caller?.respond(m.data);
            // As the gateway does: the heard event checked, then read back and checked. A failed
            // check or read leaves the caller waiting: its chain reports the refusal.
            void Promise.resolve()
              .then(() => verified('gateway', m))
              .then(() => jsm.direct.getMessage(stream, { last_by_subj: m.subject }))
              .then((stored) => {
                if (!stored) throw new Error(`${m.subject} was heard but not stored`);
                verified('gateway', {
                  subject: stored.subject,
                  data: stored.data,
                  headers: stored.header,
                });
                caller?.respond(stored.data);
              })
              .catch((err: unknown) => refuse(err as Error));
          },
        });
        nc.subscribe(`${root}.submit`, {
          callback: (_err, m) => {
            const id = new TextDecoder().decode(m.data);
            waiting.set(id, m);
            append(id, 'requested', 'gateway').catch(() => waiting.delete(id));
          },
        });
        await nc.flush();
        break;
      }
      case 'evaluator':
        await consume('evaluator', '*.requested', async (m) => {
          verified('evaluator', m);
          await append(idOf(m.subject), 'decided', 'evaluator');
        });
        break;
      case 'executor':
        await consume('executor', '*.decided', async (m) => {
          verified('executor', m);
          const id = idOf(m.subject);
          await Promise.all([append(id, 'started', 'executor'), lastSettled(id)]);
          const signedRequest = guard
            ? signToolRequest(
                guard.keys.executor.toolRequestKey,
                guard.toolSubject,
                PAYLOAD,
                Date.now(),
              )
            : undefined;
          const requestHeaders = signedRequest ? headers() : undefined;
          for (const [k, v] of Object.entries(signedRequest ?? {})) requestHeaders!.set(k, v);
          await nc.request(`${root}.tool`, PAYLOAD, {
            timeout: 10_000,
            ...(requestHeaders ? { headers: requestHeaders } : {}),
          });
          await Promise.all([append(id, 'settled', 'executor'), lastSettled(id)]);
        });
        break;
      case 'projection':
        await consume('projection', '>', async (m) => verified('journal', m));
        break;
    }
    return { consume, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A chain as a role's process is told of it (its guards by their key set). */
type SpecSent = { stream: string; root: string; keys?: KeySet };
/** What the bench tells a role's process, and what the process answers. */
type ToRole = { role: Role; specs: SpecSent[] } | 'close';
type FromRole = { ready: true } | { refusal: string; stream: string } | { failed: string };

/** The roles, each in a process of its own, serving until {@link RoleProcesses.close}. */
export interface RoleProcesses {
  pids: number[];
  close(): Promise<void>;
}

/**
 * Starts every role of the chains `specs` (their streams made) in a process of its own — one
 * process per role serves it for each chain, as one service's process serves every dispatch —
 * from this file's sources as the split's services are run, and resolves once each consumes.
 * `refuse(stream, err)` hears a role's failed check, as the in-process chain's do.
 */
export async function spawnRoles(
  specs: readonly ChainSpec[],
  refuse: (stream: string, err: Error) => void,
): Promise<RoleProcesses> {
  const children: ChildProcess[] = [];
  const close = async () => {
    await Promise.all(
      children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        if (child.connected) child.send('close' satisfies ToRole);
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }),
    );
  };
  const sent: SpecSent[] = specs.map(({ guard, ...where }) => ({
    ...where,
    ...(guard ? { keys: guard.set } : {}),
  }));
  try {
    await Promise.all(
      ROLES.map(async (role) => {
        const child = fork(__filename, [], {
          cwd: REPO_ROOT,
          execArgv: [
            '--max-semi-space-size=32',
            '--require',
            path.join(REPO_ROOT, 'scripts', 'from-source.cjs'),
          ],
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        children.push(child);
        const ready = new Promise<void>((resolve, reject) => {
          child.on('message', (m: FromRole) => {
            if ('ready' in m) resolve();
            else if ('failed' in m) reject(new Error(`the chain's ${role}: ${m.failed}`));
            else refuse(m.stream, new Error(m.refusal));
          });
          child.once('exit', (code) =>
            reject(new Error(`the chain's ${role} process exited (${code}) before it was ready`)),
          );
        });
        child.send({ role, specs: sent } satisfies ToRole);
        await withTimeout(ready, 120_000, `the chain's ${role} process`);
      }),
    );
    return { pids: children.map((c) => c.pid!), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A role's process: serves the role it is sent until it is told to close or its parent goes. */
function roleProcess(): void {
  const send = (m: FromRole) => process.connected && process.send!(m);
  const served: ServedRole[] = [];
  const exit = async () => {
    for (const role of served) await role.close();
    process.exit(0);
  };
  process.on('disconnect', () => void exit());
  process.on('message', (m: ToRole) => {
    if (m === 'close') return void exit();
    (async () => {
      for (const { keys, ...where } of m.specs) {
        const spec = { ...where, ...(keys ? { guard: guards(keys) } : {}) };
        served.push(
          await serveRole(m.role, spec, (err) =>
            send({ refusal: err.message, stream: where.stream }),
          ),
        );
      }
    })().then(
      () => send({ ready: true }),
      (err: unknown) => send({ failed: String(err) }),
    );
  });
}

if (require.main === module) roleProcess();
