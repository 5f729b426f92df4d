import type { NatsConnection } from '@nats-io/transport-node';
import type { ServiceKeys, Subjects } from '@toolgate/contracts';
import { JournalPublisher } from '@toolgate/bus';
import type { JournalPort } from '../lifecycle/ports';

/**
 * The lifecycle's journal port over the shared {@link JournalPublisher}: each event goes to
 * `<prefix>.journal.<tenant>.<runId>.<worktreeId>.<type>` with `Nats-Msg-Id` = its id and the
 * caller's trace context. Worktree events are not once-per-dispatch, so a retried transition is
 * deduplicated by id within the stream's window rather than refused. Signed with the worktree
 * service's keys.
 */
export function journalPortOf(
  nc: NatsConnection,
  subjects: Subjects,
  keys: ServiceKeys,
): JournalPort {
  const publisher = new JournalPublisher(nc, subjects, keys);
  return {
    async append(event) {
      await publisher.append(event);
    },
  };
}
