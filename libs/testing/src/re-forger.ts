import { headers as natsHeaders } from '@nats-io/transport-node';
import { NATS_URL } from './names';
import { tcpProxy } from './tcp-proxy';
import type { TestNats } from './test-nats';

/**
 * An attacker on an open broker against one journal subject: it publishes an unsigned message
 * there at once, then another every time anyone looks up the subject's last message (the direct
 * get a once-per-dispatch append makes before it appends after a forgery), on `t`'s connection.
 * A client on {@link ReForger.slowUrl} (a 50 ms link) loses every such race: its compare-and-set
 * names a sequence that is no longer the last.
 */
export interface ReForger {
  /** The broker behind a slow link, for the victim's connection. */
  readonly slowUrl: string;
  /** Unsigned messages published so far. */
  forgeries(): number;
  /** Stops forging (what it published stays in the stream). */
  stop(): void;
  /** Stops, and cuts the slow link. */
  close(): Promise<void>;
}

export async function reForger(t: TestNats, subject: string): Promise<ReForger> {
  const target = new URL(NATS_URL);
  const proxy = await tcpProxy(
    { host: target.hostname, port: Number(target.port) },
    { delayMs: 50 },
  );
  await proxy.listen();
  const type = subject.split('.').at(-1);
  const payload = new TextEncoder().encode(JSON.stringify({ type }));
  let forgeries = 0;
  const forge = () => {
    forgeries += 1;
    t.nc.publish(subject, payload, { headers: natsHeaders() });
  };
  const lookups = t.nc.subscribe(`$JS.API.DIRECT.GET.${t.subjects.journal.stream}.${subject}`, {
    callback: () => forge(),
  });
  forge();
  await t.nc.flush();
  const stop = () => lookups.unsubscribe();
  return {
    slowUrl: `nats://127.0.0.1:${proxy.port}`,
    forgeries: () => forgeries,
    stop,
    async close() {
      stop();
      await proxy.cut();
    },
  };
}
