import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { NATS_URL } from './names';
import { tcpProxy } from './tcp-proxy';
import type { TestNats } from './test-nats';

/**
 * An attacker on an open broker against one journal subject: it publishes an unsigned message
 * there at once, then another every time anyone looks up the subject's last message (the direct
 * get, or the leader's message get, a once-per-dispatch append makes before it appends after a
 * forgery), on a connection of its own to the node its victims reach.
 * A client on {@link ReForger.slowUrl} (a 100 ms link unless `delayMs` says) loses every such race:
 * its compare-and-set names a sequence that is no longer the last. The margin is the forger's over
 * a loaded machine: with 50 ms, full test runs saw the forgery arrive after the victim's append
 * (a settlement spec, an evaluator spec on the 3-node cluster).
 */
export interface ReForger {
  /** The broker behind a slow link, for the victim's connections. */
  readonly slowUrl: string;
  /** A connection over the slow link, closed by {@link ReForger.close}. */
  victim(): Promise<NatsConnection>;
  /** Unsigned messages published so far. */
  forgeries(): number;
  /** Stops forging (what it published stays in the stream). */
  stop(): void;
  /** Stops, closes the victims' connections and cuts the slow link. */
  close(): Promise<void>;
}

/**
 * Starts a {@link ReForger} on `subject`; the slow link leads to `brokerUrl` (default
 * {@link NATS_URL}; one node of a cluster, which its victims then reach through it).
 */
export async function reForger(
  t: TestNats,
  subject: string,
  brokerUrl: string = NATS_URL,
  /** The slow link's delay each way: the margin the forger has over its victim. */
  { delayMs = 100 }: { delayMs?: number } = {},
): Promise<ReForger> {
  const target = new URL(brokerUrl);
  const proxy = await tcpProxy({ host: target.hostname, port: Number(target.port) }, { delayMs });
  await proxy.listen();
  const type = subject.split('.').at(-1);
  const payload = new TextEncoder().encode(JSON.stringify({ type }));
  // The forger listens on the node its victims reach: on a cluster, a subscription made on
  // another node is known to this one only once the routes have passed its interest on, and a
  // lookup made before that went unheard (an evaluator spec's victim won its race on the 3-node
  // cluster in a loaded CI run).
  const nc = await connect({ servers: brokerUrl });
  let forgeries = 0;
  const forge = () => {
    forgeries += 1;
    nc.publish(subject, payload, { headers: natsHeaders() });
  };
  const stream = t.subjects.journal.stream;
  // A lookup from any replica (a direct get names the subject in its own) or from the stream's
  // leader (the message get API names it in its body).
  const lookups = [
    nc.subscribe(`$JS.API.DIRECT.GET.${stream}.${subject}`, { callback: () => forge() }),
    nc.subscribe(`$JS.API.STREAM.MSG.GET.${stream}`, {
      callback: (_err, msg) => {
        const body = msg.data.length ? (msg.json() as { last_by_subj?: string }) : {};
        if (body.last_by_subj === subject) forge();
      },
    }),
  ];
  forge();
  await nc.flush();
  const stop = () => lookups.forEach((sub) => sub.unsubscribe());
  const slowUrl = `nats://127.0.0.1:${proxy.port}`;
  const victims: NatsConnection[] = [];
  return {
    slowUrl,
    async victim() {
      const victim = await connect({ servers: slowUrl });
      victims.push(victim);
      return victim;
    },
    forgeries: () => forgeries,
    stop,
    async close() {
      stop();
      await Promise.all(victims.map((victim) => victim.close()));
      await nc.close();
      await proxy.cut();
    },
  };
}
