import { performance } from 'node:perf_hooks';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import {
  connect,
  headers,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
} from '@nats-io/transport-node';
import { createSubjects, generateKeySet, ServiceKeys, signToolRequest } from '@toolgate/contracts';
import { NATS_URL } from '@toolgate/testing';
import { addJournalLikeStream } from './baseline';
import { epochMs, EVENTS_PER_DISPATCH, storedHops, type Hop, type SentDispatch } from './dispatch';
import { startCpuMeter, writeSyscalls } from './machine-cpu';
import { sampleCall } from './signing';
import { BENCH_CONNECTION, openLoop, percentile, pool, round, since } from './stats';

/**
 * A dispatch's message pattern in raw NATS, with no Toolgate code on it: what the transport alone
 * costs one dispatch on this machine, in this run — the floor under `dispatch.p50Ms`.
 */
export interface RawDispatchResult {
  /** One chain at a time, the client's request to its reply. */
  rawDispatchP50Ms: number;
  rawDispatchP99Ms: number;
  rawDispatchSamples: number;
  /** The chain's p50 per hop, as `dispatch.hopsP50Ms` (the same broker timestamps). */
  rawDispatchHopsP50Ms: Record<Hop, number>;
  /** This process's CPU per chain (every connection below is in it, as in the all-in-one). */
  rawDispatchCpuMsPerDispatch: number;
  /** This process's write system calls per chain (Linux). */
  rawDispatchWriteSyscallsPerDispatch?: number;
  /** The broker's CPU per chain, when it runs on this machine. */
  rawDispatchBrokerCpuMsPerDispatch?: number;
  /**
   * The same chain one at a time with the work every dispatch must do on its path added to it
   * (signatures, their checks, the tool request's signature, the gateway's read-back; see
   * {@link Guards}), in blocks alternating with the raw chain's samples: a floor under
   * `dispatch.p50Ms` and `p99Ms` (`dispatch.p50FloorVsRawDispatch` divides it by `rawDispatchP50Ms`).
   */
  guardedChainP50Ms: number;
  guardedChainP99Ms: number;
  /**
   * The same chains pipelined, {@link PIPELINE_WINDOW} in flight as in the dispatch throughput
   * phase (after an untimed burst): chains per second until the last reply.
   */
  rawChainPipelinedPerSec: number;
  rawChainPipelinedChains: number;
  /**
   * This process's CPU per pipelined chain (every role is in it, the client and the worker too, as
   * `dispatch.cpuMsPerDispatch` counts the load generator and the worker), until the projection
   * consumer has acked every event: what `dispatch.cpuVsRawChain` divides by.
   */
  rawChainCpuMsPerDispatch: number;
  /** The broker's CPU per pipelined chain over the same span, when it runs on this machine. */
  rawChainBrokerCpuMsPerDispatch?: number;
  /**
   * This process's CPU per chain of the projection role alone: a fresh consumer reading and acking
   * a chain's four events from a backlog (as `dispatch.projectionCpuMsPerDispatch` is taken) — the
   * part of `rawChainCpuMsPerDispatch` that Toolgate's projection replaces.
   */
  rawChainProjectionCpuMsPerDispatch: number;
  /**
   * The same chains at half `rawChainPipelinedPerSec` in an open loop, as `dispatch.steady…` offers
   * half the dispatch throughput: p50 and p99 from each chain's scheduled time, and each ÷
   * `rawDispatchP50Ms` — what the steady goals ask of Toolgate (`steadyP50VsOneAtATime` ≤ 2,
   * `steadyP99VsOneAtATime` ≤ 6), asked of the raw chain; its CPU per chain (this process, until
   * the last reply) and how busy this process's event loop was.
   */
  rawChainSteadyP50Ms: number;
  rawChainSteadyP99Ms: number;
  rawChainSteadyOfferedPerSec: number;
  rawChainSteadyCpuMsPerDispatch: number;
  rawChainSteadyLoopUtilization: number;
  rawChainSteadyP50VsOneAtATime: number;
  rawChainSteadyP99VsOneAtATime: number;
}

/** Untimed chains first: in quick and full runs alike. */
const WARMUP = 100;
const PAYLOAD = new Uint8Array(400).fill(0x61);
/** In flight at once in the pipelined figure: the dispatch throughput phase's window. */
const PIPELINE_WINDOW = 256;

/**
 * Each service of the all-in-one has a connection of its own, and so does each role here:
 *
 * client ─request→ "gateway" ─append requested→ stream ─deliver→ "evaluator" ─append decided→
 * stream ─deliver→ "executor" ─append started (and read settled beside it)→ ─request→ "worker"
 * ─reply→ "executor" ─append settled (a read beside it)→ stream ─core delivery→ "gateway" ─reply→
 * client; and a "projection" consumer reads and acks every event.
 *
 * Every append expects the subject to be empty (`lastSubjectSequence: 0`) and carries a message
 * id, as the journal's appends do; consumers are durable pull consumers with explicit acks, acked
 * after the handler's append. Same waits on the broker as a dispatch, none of its work.
 */
export async function benchRawDispatch(
  jsm: JetStreamManager,
  prefix: string,
  opts: { quick: boolean },
): Promise<RawDispatchResult> {
  const raw = await openChain(jsm, `${prefix}_rawchain`, `${prefix}.rawchain`);
  const guarded = await openChain(jsm, `${prefix}_rawguarded`, `${prefix}.rawguarded`, guards());
  try {
    for (let i = 0; i < WARMUP; i++) {
      await raw.chain();
      await guarded.chain();
    }
    // One chain at a time, the plain and the guarded chain in alternate blocks (the host's speed
    // drifts within a run), each block's CPU and writes metered apart.
    const samples = opts.quick ? 200 : 500;
    const times: number[] = [];
    const guardedTimes: number[] = [];
    const sent: SentDispatch[] = [];
    let cpuMs = 0;
    let brokerCpuMs: number | undefined;
    let writes: number | undefined = 0;
    for (let done = 0; done < samples; done += SAMPLE_BLOCK) {
      const block = Math.min(SAMPLE_BLOCK, samples - done);
      const cpu = meter();
      const writes0 = writeSyscalls();
      for (let i = done; i < done + block; i++) {
        const t = performance.now();
        await raw.chain(`d${i}`);
        const ms = since(t);
        times.push(ms);
        sent.push({ dispatchId: `d${i}`, sentAt: epochMs(t), repliedAt: epochMs(t + ms) });
      }
      const writes1 = writeSyscalls();
      const blockCpu = cpu.stop(1);
      cpuMs += blockCpu.cpuMs;
      if (blockCpu.brokerCpuMs !== undefined)
        brokerCpuMs = (brokerCpuMs ?? 0) + blockCpu.brokerCpuMs;
      writes =
        writes !== undefined && writes0 !== undefined && writes1 !== undefined
          ? writes + writes1 - writes0
          : undefined;
      for (let i = done; i < done + block; i++) {
        const t = performance.now();
        await guarded.chain(`d${i}`);
        guardedTimes.push(since(t));
      }
    }
    await guarded.close();

    // Pipelined, as the throughput phase: an untimed burst, then the timed one; its CPU until the
    // projection consumer has acked every event (as a dispatch's, until the projection folded it).
    const burst = (name: string, count: number) =>
      pool(count, PIPELINE_WINDOW, async (i) => void (await raw.chain(`${name}${i}`)));
    // Quick: a smaller burst than the throughput phase's 2,000 (the run's minute), the same window.
    await burst('pw', opts.quick ? 256 : 500);
    await raw.projected();
    const chains = opts.quick ? 1_000 : 10_000;
    const pipelined = meter();
    const t0 = performance.now();
    await burst('p', chains);
    const pipelinedMs = since(t0);
    await raw.projected();
    const pipelinedCpu = pipelined.stop(chains);
    const pipelinedPerSec = chains / (pipelinedMs / 1000);

    // Half that rate in an open loop, as the dispatch's steady phase offers half its throughput
    // (quick: 2 s, as the split's; its 2,000-odd chains give the p99 as well as 3 s would).
    const steadyTimes: number[] = [];
    const steadyRate = pipelinedPerSec / 2;
    const steady = meter();
    const elu0 = performance.eventLoopUtilization();
    const steadyChains = await openLoop(
      { ratePerSec: steadyRate, seconds: opts.quick ? 2 : 20, drainMs: 60_000 },
      async (scheduled) => {
        await raw.chain();
        steadyTimes.push(performance.now() - scheduled);
      },
    );
    const steadyCpu = steady.stop(steadyChains);
    const steadyLoop = performance.eventLoopUtilization(elu0);
    await raw.projected();

    // The projection role alone, taken as the projection's own fold is (from a backlog, until its
    // consumer is drained): a second such consumer reads and acks every event the stream holds.
    const held = (await jsm.streams.info(raw.stream)).state.messages;
    const replay = meter();
    await raw.consume('replay', '>', async () => undefined);
    await raw.projected('replay');
    const replayCpu = replay.stop(held / EVENTS_PER_DISPATCH);
    const p50 = percentile(times, 50);
    const steadyP50 = percentile(steadyTimes, 50);
    const steadyP99 = percentile(steadyTimes, 99);
    return {
      rawDispatchP50Ms: round(p50, 3),
      rawDispatchP99Ms: round(percentile(times, 99), 3),
      rawDispatchSamples: samples,
      rawDispatchHopsP50Ms: await storedHops(raw.client, raw.stream, `${raw.root}.events.>`, sent),
      rawDispatchCpuMsPerDispatch: round(cpuMs / samples, 3),
      ...(writes !== undefined
        ? { rawDispatchWriteSyscallsPerDispatch: round(writes / samples, 1) }
        : {}),
      ...(brokerCpuMs !== undefined
        ? { rawDispatchBrokerCpuMsPerDispatch: round(brokerCpuMs / samples, 3) }
        : {}),
      guardedChainP50Ms: round(percentile(guardedTimes, 50), 3),
      guardedChainP99Ms: round(percentile(guardedTimes, 99), 3),
      rawChainPipelinedPerSec: Math.round(pipelinedPerSec),
      rawChainPipelinedChains: chains,
      rawChainCpuMsPerDispatch: pipelinedCpu.cpuMs,
      rawChainProjectionCpuMsPerDispatch: replayCpu.cpuMs,
      ...(pipelinedCpu.brokerCpuMs !== undefined
        ? { rawChainBrokerCpuMsPerDispatch: pipelinedCpu.brokerCpuMs }
        : {}),
      rawChainSteadyP50Ms: round(steadyP50, 3),
      rawChainSteadyP99Ms: round(steadyP99, 3),
      rawChainSteadyOfferedPerSec: Math.round(steadyRate),
      rawChainSteadyCpuMsPerDispatch: steadyCpu.cpuMs,
      rawChainSteadyLoopUtilization: round(steadyLoop.utilization, 3),
      rawChainSteadyP50VsOneAtATime: round(steadyP50 / p50),
      rawChainSteadyP99VsOneAtATime: round(steadyP99 / p50),
    };
  } finally {
    await raw.close();
    await guarded.close();
  }
}

/** One-at-a-time samples of each chain in turn, this many at a time. */
const SAMPLE_BLOCK = 25;

/**
 * The work every dispatch does on its path that the raw chain does not, and nothing else: each
 * event signed by its producer (Toolgate's own {@link ServiceKeys}, for every reader) and verified
 * by the role that reads it, the executor's Ed25519 signature on the tool request, and the
 * gateway's read of the `settled` it heard back from the stream before it answers (a `wait` is
 * answered only with what was recorded). The events are a dispatch's own (their size is the
 * journal's). Left out: the checks of each event's shape, the policy, the other reads that decide,
 * metrics, traces, the projection's fold — so the guarded chain is a floor under a dispatch.
 */
interface Guards {
  keys: Record<'gateway' | 'evaluator' | 'executor' | 'journal', ServiceKeys>;
  /** The journal subject a chain's event stands for: what its signature binds. */
  subject(id: string, type: ChainEvent): string;
  payload: Record<ChainEvent, Uint8Array>;
  toolSubject: string;
}

type ChainEvent = 'requested' | 'decided' | 'started' | 'settled';

function guards(): Guards {
  const set = generateKeySet();
  const subjects = createSubjects('bench');
  const { all } = sampleCall('noop');
  const bytes = (type: ChainEvent) =>
    new TextEncoder().encode(JSON.stringify(all.find((e) => e.type === type)));
  return {
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

/** A chain's roles, connected and consuming, ready for {@link OpenChain.chain}. */
interface OpenChain {
  stream: string;
  root: string;
  client: NatsConnection;
  /** One chain: the client's request to its reply. */
  chain(id?: string): Promise<Msg>;
  /** Resolves once the consumer `name` has acked everything. */
  projected(name?: string): Promise<void>;
  /** Another durable consumer on the projection's connection, filtered on `events.<filter>`. */
  consume(name: string, filter: string, handle: (m: JsMsg) => Promise<void>): Promise<void>;
  /** Closes its connections and deletes its stream; idempotent. */
  close(): Promise<void>;
}

async function openChain(
  jsm: JetStreamManager,
  stream: string,
  root: string,
  guard?: Guards,
): Promise<OpenChain> {
  const event = (id: string, type: string) => `${root}.events.${id}.${type}`;
  await addJournalLikeStream(jsm, stream, `${root}.events.>`);
  const conns: NatsConnection[] = [];
  const reading: ConsumerMessages[] = [];
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    for (const messages of reading) await messages.close().catch(() => undefined);
    await Promise.all(conns.map((nc) => nc.close().catch(() => undefined)));
    await jsm.streams.delete(stream).catch(() => undefined);
  };
  const open = async (role: string) => {
    const nc = await connect({
      servers: NATS_URL,
      name: `bench-${stream}-${role}`,
      ...BENCH_CONNECTION,
    });
    conns.push(nc);
    return nc;
  };
  try {
    const client = await open('client');
    const gateway = await open('gateway');
    const evaluator = await open('evaluator');
    const executor = await open('executor');
    const worker = await open('worker');
    const projection = await open('projection');
    const append = (
      nc: NatsConnection,
      id: string,
      type: ChainEvent,
      signer?: keyof Guards['keys'],
    ) => {
      let payload: Uint8Array = PAYLOAD;
      let signed: MsgHdrs | undefined;
      if (guard && signer) {
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
    const idOf = (subject: string) => subject.split('.').at(-2)!;
    /**
     * The first check that failed: a chain waiting on it times out, and says this instead (the
     * failure is the bench's, not the broker's).
     */
    let refusal: Error | undefined;
    /** The reader's check of a message it acts on (guarded chain); throws when it fails. */
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
      if (refused)
        throw (refusal ??= new Error(`the guarded chain's ${type} failed its check: ${refused}`));
    };
    const consume = async (
      name: string,
      filter: string,
      handle: (m: JsMsg) => Promise<void>,
      nc = projection,
    ) => {
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

    // The gateway: appends `requested`, answers when the core delivery of `settled` comes (guarded:
    // once it has read it back from the stream).
    const gatewayJsm = await jetstreamManager(gateway);
    const waiting = new Map<string, Msg>();
    gateway.subscribe(`${root}.events.*.settled`, {
      callback: (_err, m) => {
        const id = idOf(m.subject);
        const caller = waiting.get(id);
        waiting.delete(id);
        if (!guard) return void caller?.respond(m.data);
        // As the gateway does: the heard event checked, then read back and checked. A failed
        // check or read leaves the caller waiting: its chain reports `refusal`.
        void Promise.resolve()
          .then(() => verified('gateway', m))
          .then(() => gatewayJsm.direct.getMessage(stream, { last_by_subj: m.subject }))
          .then((stored) => {
            if (!stored) throw (refusal ??= new Error(`${m.subject} was heard but not stored`));
            verified('gateway', {
              subject: stored.subject,
              data: stored.data,
              headers: stored.header,
            });
            caller?.respond(stored.data);
          })
          .catch((err: unknown) => void (refusal ??= err as Error));
      },
    });
    gateway.subscribe(`${root}.submit`, {
      callback: (_err, m) => {
        const id = new TextDecoder().decode(m.data);
        waiting.set(id, m);
        append(gateway, id, 'requested', 'gateway').catch(() => waiting.delete(id));
      },
    });
    worker.subscribe(`${root}.tool`, { callback: (_err, m) => void m.respond(PAYLOAD) });
    const workerReady = Promise.all([gateway.flush(), worker.flush()]);
    const executorJsm = await jetstreamManager(executor);
    const lastSettled = (id: string) =>
      executorJsm.direct.getMessage(stream, { last_by_subj: event(id, 'settled') });
    await consume(
      'evaluator',
      '*.requested',
      async (m) => {
        verified('evaluator', m);
        await append(evaluator, idOf(m.subject), 'decided', 'evaluator');
      },
      evaluator,
    );
    await consume(
      'executor',
      '*.decided',
      async (m) => {
        verified('executor', m);
        const id = idOf(m.subject);
        await Promise.all([append(executor, id, 'started', 'executor'), lastSettled(id)]);
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
        await executor.request(`${root}.tool`, PAYLOAD, {
          timeout: 10_000,
          ...(requestHeaders ? { headers: requestHeaders } : {}),
        });
        await Promise.all([append(executor, id, 'settled', 'executor'), lastSettled(id)]);
      },
      executor,
    );
    await consume('projection', '>', async (m) => verified('journal', m));
    await workerReady;

    let n = 0;
    const projected = async (name = 'projection') => {
      for (;;) {
        const info = await jsm.consumers.info(stream, `${stream}_${name}`);
        if (info.num_pending + info.num_ack_pending === 0) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    return {
      stream,
      root,
      client,
      // One timer per chain, the request's own (a chain whose append failed times out).
      chain: (id = `w${n++}`) =>
        client
          .request(`${root}.submit`, new TextEncoder().encode(id), { timeout: 10_000 })
          .catch((err: unknown) => {
            throw refusal ?? err;
          }),
      projected,
      consume: (name, filter, handle) => consume(name, filter, handle),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * This process's CPU and the broker's from now until `stop(chains)`, in ms per chain (the broker's
 * when it runs on this machine): what both phases of the raw chain report.
 */
function meter(): { stop(chains: number): { cpuMs: number; brokerCpuMs?: number } } {
  const servers = startCpuMeter();
  const cpu0 = process.cpuUsage();
  return {
    stop(chains) {
      const cpu = process.cpuUsage(cpu0);
      const { brokerSeconds } = servers.stop();
      return {
        cpuMs: round((cpu.user + cpu.system) / 1000 / chains, 3),
        ...(brokerSeconds !== undefined
          ? { brokerCpuMs: round((brokerSeconds * 1000) / chains, 3) }
          : {}),
      };
    },
  };
}
