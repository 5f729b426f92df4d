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
import { connect, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { NATS_URL } from '@toolgate/testing';
import { addJournalLikeStream } from './baseline';
import { epochMs, EVENTS_PER_DISPATCH, storedHops, type Hop, type SentDispatch } from './dispatch';
import { startCpuMeter, writeSyscalls } from './machine-cpu';
import { BENCH_CONNECTION, percentile, pool, round, since } from './stats';

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
  const stream = `${prefix}_rawchain`;
  const root = `${prefix}.rawchain`;
  const event = (id: string, type: string) => `${root}.events.${id}.${type}`;
  await addJournalLikeStream(jsm, stream, `${root}.events.>`);
  const conns: NatsConnection[] = [];
  const reading: ConsumerMessages[] = [];
  const open = async (role: string) => {
    const nc = await connect({
      servers: NATS_URL,
      name: `bench-rawchain-${role}`,
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
    const append = (nc: NatsConnection, id: string, type: string) =>
      jetstream(nc).publish(event(id, type), PAYLOAD, {
        msgID: `${id}:${type}`,
        expect: { lastSubjectSequence: 0 },
      });
    const consume = async (
      nc: NatsConnection,
      name: string,
      filter: string,
      handle: (m: JsMsg) => Promise<void>,
    ) => {
      await jsm.consumers.add(stream, {
        durable_name: `${prefix}_rawchain_${name}`,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: filter,
      });
      const consumer = await jetstream(nc).consumers.get(stream, `${prefix}_rawchain_${name}`);
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
    const idOf = (subject: string) => subject.split('.').at(-2)!;

    // The gateway: appends `requested`, answers when the core delivery of `settled` comes.
    const waiting = new Map<string, Msg>();
    gateway.subscribe(`${root}.events.*.settled`, {
      callback: (_err, m) => {
        const id = idOf(m.subject);
        waiting.get(id)?.respond(m.data);
        waiting.delete(id);
      },
    });
    gateway.subscribe(`${root}.submit`, {
      callback: (_err, m) => {
        const id = new TextDecoder().decode(m.data);
        waiting.set(id, m);
        append(gateway, id, 'requested').catch(() => waiting.delete(id));
      },
    });
    worker.subscribe(`${root}.tool`, { callback: (_err, m) => void m.respond(PAYLOAD) });
    const workerReady = Promise.all([gateway.flush(), worker.flush()]);
    const executorJsm = await jetstreamManager(executor);
    const lastSettled = (id: string) =>
      executorJsm.direct.getMessage(stream, { last_by_subj: event(id, 'settled') });
    await consume(evaluator, 'evaluator', `${root}.events.*.requested`, async (m) => {
      await append(evaluator, idOf(m.subject), 'decided');
    });
    await consume(executor, 'executor', `${root}.events.*.decided`, async (m) => {
      const id = idOf(m.subject);
      await Promise.all([append(executor, id, 'started'), lastSettled(id)]);
      await executor.request(`${root}.tool`, PAYLOAD, { timeout: 10_000 });
      await Promise.all([append(executor, id, 'settled'), lastSettled(id)]);
    });
    await consume(projection, 'projection', `${root}.events.>`, async () => undefined);
    await workerReady;

    let n = 0;
    // One timer per chain, the request's own (a chain whose append failed times out).
    const chain = (id = `w${n++}`) =>
      client.request(`${root}.submit`, new TextEncoder().encode(id), { timeout: 10_000 });
    for (let i = 0; i < WARMUP; i++) await chain();
    const samples = opts.quick ? 200 : 500;
    const times: number[] = [];
    const sent: SentDispatch[] = [];
    const sequential = meter();
    const writes0 = writeSyscalls();
    for (let i = 0; i < samples; i++) {
      const t = performance.now();
      await chain(`d${i}`);
      const ms = since(t);
      times.push(ms);
      sent.push({ dispatchId: `d${i}`, sentAt: epochMs(t), repliedAt: epochMs(t + ms) });
    }
    const sequentialCpu = sequential.stop(samples);
    const writes1 = writeSyscalls();

    // Pipelined, as the throughput phase: an untimed burst, then the timed one; its CPU until the
    // projection consumer has acked every event (as a dispatch's, until the projection folded it).
    const projected = async (name = 'projection') => {
      for (;;) {
        const info = await jsm.consumers.info(stream, `${prefix}_rawchain_${name}`);
        if (info.num_pending + info.num_ack_pending === 0) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const burst = (name: string, count: number) =>
      pool(count, PIPELINE_WINDOW, async (i) => void (await chain(`${name}${i}`)));
    // Quick: a smaller burst than the throughput phase's 2,000 (the run's minute), the same window.
    await burst('pw', opts.quick ? 256 : 500);
    await projected();
    const chains = opts.quick ? 1_000 : 10_000;
    const pipelined = meter();
    const t0 = performance.now();
    await burst('p', chains);
    const pipelinedMs = since(t0);
    await projected();
    const pipelinedCpu = pipelined.stop(chains);

    // The projection role alone, taken as the projection's own fold is (from a backlog, until its
    // consumer is drained): a second such consumer reads and acks every event the stream holds.
    const held = (await jsm.streams.info(stream)).state.messages;
    const replay = meter();
    await consume(projection, 'replay', `${root}.events.>`, async () => undefined);
    await projected('replay');
    const replayCpu = replay.stop(held / EVENTS_PER_DISPATCH);
    return {
      rawDispatchP50Ms: round(percentile(times, 50), 3),
      rawDispatchP99Ms: round(percentile(times, 99), 3),
      rawDispatchSamples: samples,
      rawDispatchHopsP50Ms: await storedHops(client, stream, `${root}.events.>`, sent),
      rawDispatchCpuMsPerDispatch: sequentialCpu.cpuMs,
      ...(writes0 !== undefined && writes1 !== undefined
        ? { rawDispatchWriteSyscallsPerDispatch: round((writes1 - writes0) / samples, 1) }
        : {}),
      ...(sequentialCpu.brokerCpuMs !== undefined
        ? { rawDispatchBrokerCpuMsPerDispatch: sequentialCpu.brokerCpuMs }
        : {}),
      rawChainPipelinedPerSec: Math.round(chains / (pipelinedMs / 1000)),
      rawChainPipelinedChains: chains,
      rawChainCpuMsPerDispatch: pipelinedCpu.cpuMs,
      rawChainProjectionCpuMsPerDispatch: replayCpu.cpuMs,
      ...(pipelinedCpu.brokerCpuMs !== undefined
        ? { rawChainBrokerCpuMsPerDispatch: pipelinedCpu.brokerCpuMs }
        : {}),
    };
  } finally {
    for (const messages of reading) await messages.close().catch(() => undefined);
    await Promise.all(conns.map((nc) => nc.close().catch(() => undefined)));
    await jsm.streams.delete(stream).catch(() => undefined);
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
