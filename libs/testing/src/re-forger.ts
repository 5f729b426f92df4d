import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { NATS_URL } from './names';
import { tcpProxy } from './tcp-proxy';
import type { TestNats } from './test-nats';

/**
 * An attacker on an open broker against one journal subject: it publishes an unsigned message
 * there at once, then another every time anyone looks up the subject's last message (the direct
 * get, or the leader's message get, a once-per-dispatch append makes before it appends after a
 * forgery), on a connection of its own to the node its victims reach — a victim's lookup as its
 * answer comes back, which waits for the forgery (so the answer never names it).
 * A client on {@link ReForger.slowUrl} (a 100 ms link unless `delayMs` says) loses every such race:
 * its compare-and-set names a sequence that is no longer the last. The link holds what the client
 * sends after a lookup of the subject until that lookup's forgery is in, so the race is not left to
 * timing (with 50 ms and no hold, full test runs saw the forgery arrive after the victim's append).
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

/** How long the link holds a victim after a lookup whose forgery does not come (a test's bound). */
const LOOKUP_HOLD_MAX_MS = 5_000;

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
  const stream = t.subjects.journal.stream;
  const type = subject.split('.').at(-1);
  const payload = new TextEncoder().encode(JSON.stringify({ type }));
  // The forger listens on the node its victims reach: on a cluster, a subscription made on
  // another node is known to this one only once the routes have passed its interest on, and a
  // lookup made before that went unheard (an evaluator spec's victim won its race on the 3-node
  // cluster in a loaded CI run).
  const nc = await connect({ servers: brokerUrl });
  let forgeries = 0;
  let stopped = false;
  /** Each forgery once the broker has taken it (a flush after its publish). */
  const forged: Promise<void>[] = [];
  /** Holds waiting for the next forgery (or the stop). */
  const waiting = new Set<() => void>();
  const wake = () => {
    for (const resolve of waiting) resolve();
    waiting.clear();
  };
  const forge = () => {
    forgeries += 1;
    nc.publish(subject, payload, { headers: natsHeaders() });
    forged.push(nc.flush().catch(() => undefined));
    wake();
  };
  // The slow link alone left the race to timing, and a loaded CI run saw a victim win one (the
  // settlement spec on the 3-node cluster; not reproduced, a stalled event loop did not do it). So
  // the link holds whatever a victim sends after a lookup of the subject until the forgery that
  // lookup brings is in, however late.
  const lookupMarks = [
    Buffer.from(`$JS.API.DIRECT.GET.${stream}.${subject}`),
    Buffer.from(`"last_by_subj":"${subject}"`),
  ];
  const longest = Math.max(...lookupMarks.map((m) => m.length));
  let tail = Buffer.alloc(0);
  let held: Promise<void> | undefined;
  // A forgery made when the forger hears a lookup could be stored before the lookup was answered
  // (the leader takes API requests and stream messages on queues of their own): the lookup then
  // named the forgery it brought, and the victim's append after it won — the flake of the
  // evaluator's cluster spec (2026-12-07, a fresh-clone CI run). So a victim's lookup is forged
  // on when its answer comes back through the link, and the answer is held until the forgery is
  // in: it names the forgery before, never the one it brought.
  /** The reply subjects of the victims' lookups: `proxied` every one, `awaiting` until answered. */
  const proxied = new Set<string>();
  const awaiting = new Set<string>();
  let clientText = '';
  const noteLookupReplies = (chunk: Buffer) => {
    clientText = (clientText + chunk.toString('latin1')).slice(-8192);
    for (const mark of lookupMarks) {
      const text = mark.toString('latin1');
      for (let at = clientText.indexOf(text); at >= 0; at = clientText.indexOf(text, at + 1)) {
        // The PUB (or HPUB) line of the request the mark is in: its reply subject.
        const start = clientText.lastIndexOf('PUB ', at);
        const end = clientText.indexOf('\r\n', start);
        if (start < 0 || end < 0) continue;
        const tokens = clientText.slice(start + 4, end).split(' ');
        const withHeaders = clientText[start - 1] === 'H';
        const reply = tokens.length === (withHeaders ? 4 : 3) ? tokens[1] : undefined;
        if (reply && !proxied.has(reply)) {
          proxied.add(reply);
          awaiting.add(reply);
        }
      }
    }
  };
  let serverText = '';
  const serverGate = (chunk: Buffer) => {
    serverText = (serverText + chunk.toString('latin1')).slice(-8192);
    let answered = false;
    for (const reply of awaiting) {
      if (!serverText.includes(`MSG ${reply} `)) continue;
      awaiting.delete(reply);
      if (!stopped) {
        forge();
        answered = true;
      }
    }
    return answered ? Promise.all(forged).then(() => undefined) : undefined;
  };
  const forgeryAfter = async (count: number) => {
    if (!stopped && forgeries <= count) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        waiting.add(resolve);
        timer = setTimeout(resolve, LOOKUP_HOLD_MAX_MS);
      });
      clearTimeout(timer);
    }
    await Promise.all(forged);
  };
  const gate = (chunk: Buffer) => {
    noteLookupReplies(chunk);
    const wait = held;
    const seen = Buffer.concat([tail, chunk]);
    // A mark counts if it ends in this chunk: one split across two chunks is found, one found
    // before is not found again.
    const found = lookupMarks.some(
      (mark) => seen.indexOf(mark, Math.max(0, tail.length - mark.length + 1)) >= 0,
    );
    tail = seen.subarray(Math.max(0, seen.length - (longest - 1)));
    if (!stopped && found) held = forgeryAfter(forgeries);
    return wait;
  };
  const proxy = await tcpProxy(
    { host: target.hostname, port: Number(target.port) },
    { delayMs, gate, serverGate },
  );
  await proxy.listen();
  // A lookup from any replica (a direct get names the subject in its own) or from the stream's
  // leader (the message get API names it in its body).
  // A victim's lookup is forged on as its answer comes back (above); any other, at once.
  const heard = (reply: string | undefined) => {
    if (!reply || !proxied.has(reply)) forge();
  };
  const lookups = [
    nc.subscribe(`$JS.API.DIRECT.GET.${stream}.${subject}`, {
      callback: (_err, msg) => heard(msg.reply),
    }),
    nc.subscribe(`$JS.API.STREAM.MSG.GET.${stream}`, {
      callback: (_err, msg) => {
        const body = msg.data.length ? (msg.json() as { last_by_subj?: string }) : {};
        if (body.last_by_subj === subject) heard(msg.reply);
      },
    }),
  ];
  forge();
  await nc.flush();
  const stop = () => {
    stopped = true;
    lookups.forEach((sub) => sub.unsubscribe());
    wake();
  };
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
