import {
  UntrustedReason,
  decodeJournalEvent,
  eventTypeOfSubject,
  type JournalEvent,
  type EventKeys,
  type SignatureHeaders,
} from '@toolgate/contracts';

/** A journal message as a reader may act on it, or why it may not. */
export type TrustedEvent =
  | { ok: true; event: JournalEvent }
  /** `not-an-event`: signed by its producer but not an event this release reads (a poison message). */
  | { ok: false; reason: UntrustedReason | 'not-an-event' };

/**
 * The one check every reader of the journal makes before acting on a message: signed for this
 * service by an identity that produces the event type its subject names (`ServiceKeys.verifyEvent`),
 * and a payload that is an event of that very type. The signature is checked first, so an
 * untrusted message is never parsed.
 */
export function trustedEvent(
  keys: EventKeys,
  subject: string,
  data: Uint8Array,
  headers: SignatureHeaders | undefined,
): TrustedEvent {
  const reason = keys.verifyEvent(subject, data, headers);
  if (reason) return { ok: false, reason };
  const event = decodeJournalEvent(data);
  if (!event) return { ok: false, reason: 'not-an-event' };
  if (eventTypeOfSubject(subject) !== event.type)
    return { ok: false, reason: UntrustedReason.SubjectMismatch };
  return { ok: true, event };
}
