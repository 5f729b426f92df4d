import { performance } from 'node:perf_hooks';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { startCpuMeter } from './machine-cpu';
import { percentile, pool, round, since, withTimeout } from './stats';

export interface BaselineResult {
  jetstreamSyncPublishP50Ms: number;
  jetstreamSyncPublishP99Ms: number;
  jetstreamAsyncPublishPerSec: number;
  jetstreamConsumeAckPerSec: number;
  payloadBytes: number;
  syncSamples: number;
  asyncMessages: number;
  asyncWindow: number;
  storage: 'file';
  /**
   * CPU per sync publish (µs): this process's (the client's: publish, wait, read the ack) and the
   * broker's, when it runs here — what one awaited round trip costs each side, against which a
   * one-at-a-time dispatch's CPU (`dispatch.latencyCpuMsPerDispatch`, …) is held.
   */
  clientCpuUsPerSyncPublish: number;
  brokerCpuUsPerSyncPublish?: number;
  /** The broker's CPU per message published in the async figure (µs), when it runs here. */
  brokerCpuUsPerPublish?: number;
  /** The broker's CPU per message delivered and acked in the consume figure (µs). */
  brokerCpuUsPerConsumeAck?: number;
}

/** Publishes in flight at once in the async figure. */
const WINDOW = 512;
/** Roughly a journal event's size (the dispatch section reports the real average). */
const PAYLOAD_BYTES = 512;

/**
 * Raw JetStream on this machine, the yardstick every dispatch ratio is taken against: a throwaway
 * file-storage stream (the journal's storage) under the bench prefix, with the journal's stream
 * settings (limits retention, direct get, a 2-minute duplicate window).
 *
 * - sync publish: one `js.publish` awaited at a time, p50/p99 of the ack round trip;
 * - async publish: `WINDOW` publishes kept in flight, messages per second until the last ack;
 * - consume+ack: a durable pull consumer (`consume()`, explicit acks) reading every message back,
 *   per second until the last message's ack is confirmed by the server.
 */
export async function benchBaseline(
  nc: NatsConnection,
  jsm: JetStreamManager,
  prefix: string,
  opts: { quick: boolean },
): Promise<BaselineResult> {
  const stream = `${prefix}_baseline`;
  const subject = `${prefix}.baseline.events`;
  await addJournalLikeStream(jsm, stream, `${prefix}.baseline.>`);
  try {
    const js = jetstream(nc);
    const payload = new Uint8Array(PAYLOAD_BYTES).fill(0x61);

    const syncSamples = opts.quick ? 300 : 2000;
    for (let i = 0; i < 50; i++) await js.publish(subject, payload);
    const syncTimes: number[] = [];
    const syncCpu = startCpuMeter();
    const client0 = process.cpuUsage();
    for (let i = 0; i < syncSamples; i++) {
      const t = performance.now();
      await js.publish(subject, payload);
      syncTimes.push(since(t));
    }
    const client = process.cpuUsage(client0);
    const synced = syncCpu.stop();

    const asyncMessages = opts.quick ? 20_000 : 100_000;
    // Warm the async path, then purge so the consumer below reads exactly the timed messages.
    await pool(2_000, WINDOW, async () => void (await js.publish(subject, payload)));
    await jsm.streams.purge(stream);
    const publishCpu = startCpuMeter();
    const t0 = performance.now();
    await pool(asyncMessages, WINDOW, async () => void (await js.publish(subject, payload)));
    const asyncMs = since(t0);
    const published = publishCpu.stop();

    const durable = `${prefix}_baseline_reader`;
    await jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_ack_pending: 10_000,
    });
    const consumer = await js.consumers.get(stream, durable);
    const consumeCpu = startCpuMeter();
    const t1 = performance.now();
    const messages = await consumer.consume({ max_messages: 1000 });
    let seen = 0;
    await withTimeout(
      (async () => {
        for await (const m of messages) {
          seen++;
          if (seen === asyncMessages) {
            await m.ackAck();
            break;
          }
          m.ack();
        }
      })(),
      120_000,
      'the baseline consumer to read every message',
    );
    const consumeMs = since(t1);
    const consumed = consumeCpu.stop();
    await messages.close();
    const info = await jsm.consumers.info(stream, durable);
    if (info.num_ack_pending !== 0 || info.num_pending !== 0) {
      throw new Error(
        `baseline consumer left ${info.num_ack_pending} unacked and ${info.num_pending} pending`,
      );
    }

    return {
      jetstreamSyncPublishP50Ms: round(percentile(syncTimes, 50), 3),
      jetstreamSyncPublishP99Ms: round(percentile(syncTimes, 99), 3),
      jetstreamAsyncPublishPerSec: Math.round(asyncMessages / (asyncMs / 1000)),
      jetstreamConsumeAckPerSec: Math.round(asyncMessages / (consumeMs / 1000)),
      payloadBytes: PAYLOAD_BYTES,
      syncSamples,
      asyncMessages,
      asyncWindow: WINDOW,
      storage: 'file',
      clientCpuUsPerSyncPublish: round((client.user + client.system) / syncSamples, 1),
      ...perMessageUs('brokerCpuUsPerSyncPublish', synced.brokerSeconds, syncSamples),
      ...perMessageUs('brokerCpuUsPerPublish', published.brokerSeconds, asyncMessages),
      ...perMessageUs('brokerCpuUsPerConsumeAck', consumed.brokerSeconds, asyncMessages),
    };
  } finally {
    await jsm.streams.delete(stream).catch(() => undefined);
  }
}

/** A throwaway stream with the journal's settings: file storage, direct get, a 2-minute dedupe window. */
export function addJournalLikeStream(
  jsm: JetStreamManager,
  name: string,
  subject: string,
): Promise<unknown> {
  return jsm.streams.add({
    name,
    subjects: [subject],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    num_replicas: 1,
    allow_direct: true,
    duplicate_window: 120_000 * 1_000_000,
  });
}

function perMessageUs<K extends string>(
  field: K,
  seconds: number | undefined,
  messages: number,
): Partial<Record<K, number>> {
  if (seconds === undefined) return {};
  return { [field]: round((seconds * 1e6) / messages, 1) } as Partial<Record<K, number>>;
}
