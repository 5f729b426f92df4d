import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import type { JetStreamClient } from '@nats-io/jetstream';
import {
  EVENT_SIGNING,
  ONCE_PER_DISPATCH,
  ServiceKeys,
  devKeySet,
  eventTypeOfSubject,
  type EventKeys,
  type JournalEvent,
  type Subjects,
  type JournalEventType,
  type KeySet,
  type ServiceIdentity,
} from '@toolgate/contracts';

let set: KeySet | undefined;
const cache = new Map<ServiceIdentity, ServiceKeys>();

/**
 * The signing keys of `identity` from this machine's development keyring — the keys the services a
 * test starts (in process or as processes, without configured keys) use too, so a test can sign
 * as any of them and verify what they wrote.
 */
export function testKeys(identity: ServiceIdentity): ServiceKeys {
  let keys = cache.get(identity);
  if (!keys) {
    set ??= devKeySet(process.env);
    keys = ServiceKeys.ofSet(identity, set);
    cache.set(identity, keys);
  }
  return keys;
}

/**
 * Keys for a test's journal publisher that stands in for every service: each event is signed as
 * the first identity that produces its type would sign it (so the services read it as genuine),
 * and reads are verified as the journal verifies them (it reads every type).
 */
export function testJournalKeys(): EventKeys {
  return {
    signEvent: (subject, type, payload, headers) =>
      testKeys(EVENT_SIGNING[type].producers[0]!).signEvent(subject, type, payload, headers),
    verifyEvent: (subject, payload, headers) =>
      testKeys('journal').verifyEvent(subject, payload, headers),
  };
}

/**
 * Headers that sign a raw journal publish as the producer of the type its subject names would
 * (`testJournalKeys`): for tests that publish with `js.publish` rather than a `JournalPublisher`.
 */
export function signedHeaders(
  subject: string,
  data: Uint8Array | string,
  into: MsgHdrs = natsHeaders(),
): MsgHdrs {
  const payload = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  const type = eventTypeOfSubject(subject) as JournalEventType;
  testJournalKeys().signEvent(subject, type, payload, into);
  return into;
}

/**
 * Publishes `events` to the journal one by one as their producers would: signed
 * (`signedHeaders`), deduplicated by event id, and once per dispatch for the types that are.
 */
export async function publishSigned(
  js: JetStreamClient,
  subjects: Subjects,
  events: readonly JournalEvent[],
): Promise<void> {
  for (const event of events) {
    const subject = subjects.journal.event(event.tenant, event.runId, event.dispatchId, event.type);
    const data = JSON.stringify(event);
    await js.publish(subject, data, {
      headers: signedHeaders(subject, data),
      msgID: event.id,
      ...(ONCE_PER_DISPATCH.has(event.type) ? { expect: { lastSubjectSequence: 0 } } : {}),
    });
  }
}
