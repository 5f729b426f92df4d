import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJsApiError, JsApiCode } from '@toolgate/bus';
import type { Subjects } from '@toolgate/contracts';
import type { ReadinessCheck } from './health';

/**
 * Whether what the service works on exists on the broker: the journal (every partition's) and dead-letter streams, the
 * streams of its KV buckets and object stores, and the service's own durable consumers. A stream deleted under a running stack (an operator's
 * mistake, a broker that lost its store) otherwise leaves `/readyz` at 200 while every append
 * fails and every pull finds nothing.
 *
 * Nothing is recreated here. The journal stream is the source of truth: an empty one made in its
 * place would let submissions through as if nothing had happened while the audit trail, the
 * dedup of resubmissions and the open approvals are gone, and its sequences would start again at 1
 * under a projection that has folded those numbers already. The service answers 503 and says so
 * in its log, once per change, until the stream (and its consumers) are back — restored from a
 * backup, or, knowingly, started afresh by restarting the services (docs/faults.md).
 */
export function journalReadinessCheck(
  nc: NatsConnection,
  subjects: Subjects,
  consumers: () => readonly string[],
  log: (line: string) => void,
  /** Other streams the service needs (its KV buckets' and object stores'). */
  otherStreams: readonly string[] = [],
): ReadinessCheck {
  let jsm: Promise<JetStreamManager> | undefined;
  let reported: string | null = null;
  const exists = async (lookup: () => Promise<unknown>): Promise<boolean> => {
    try {
      await lookup();
      return true;
    } catch (err) {
      if (isJsApiError(err, JsApiCode.StreamNotFound)) return false;
      if (isJsApiError(err, JsApiCode.ConsumerNotFound)) return false;
      throw err;
    }
  };
  return {
    name: 'journal-streams',
    async check() {
      const manager = await (jsm ??= jetstreamManager(nc, { checkAPI: false }));
      // Every partition's stream, and the service's consumers on each of them.
      const journals = subjects.journal.partitions.map((p) => p.stream);
      const streams = [...journals, subjects.deadLetter.stream, ...otherStreams];
      const partitioned = journals.length > 1;
      const onStreams = consumers().flatMap((name) => journals.map((stream) => ({ stream, name })));
      const found = await Promise.all([
        ...streams.map((s) => exists(() => manager.streams.info(s))),
        ...onStreams.map((c) => exists(() => manager.consumers.info(c.stream, c.name))),
      ]);
      const missing = [
        ...streams.map((s) => `stream ${s}`),
        ...onStreams.map((c) =>
          partitioned ? `consumer ${c.name} on ${c.stream}` : `consumer ${c.name}`,
        ),
      ].filter((_, i) => !found[i]);
      const now = missing.length ? missing.join(', ') : null;
      if (now !== reported) {
        log(
          now
            ? `missing on the broker: ${now}; /readyz answers 503 until it is restored (a journal stream is never recreated empty by a running service: it is the source of truth)`
            : `the journal streams and consumers are back; /readyz follows them again`,
        );
        reported = now;
      }
      return now === null;
    },
  };
}
