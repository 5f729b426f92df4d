import { eventually, testJournalKeys } from '@toolgate/testing';
import { connect, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { JournalPublisher } from '@toolgate/bus';
import type { Subjects } from '@toolgate/contracts';
import type { TokenGrant } from '@toolgate/gateway';

const decoder = new TextDecoder();
const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The tenant, tool and tokens of a chaos run. */
export const CHAOS_TENANT = 'chaos';
export const CHAOS_TOOL = 'chaos_echo';
/** A second tool, registered only after the kills. */
export const CHAOS_TOOL_AFTER = 'chaos_after';
export const CHAOS_TOKENS = {
  admin: 'chaos-admin-token-0123456789',
  agent: 'chaos-agent-token-0123456789',
} as const;
export const CHAOS_GRANTS: readonly TokenGrant[] = [
  {
    token: CHAOS_TOKENS.admin,
    tenant: CHAOS_TENANT,
    scopes: ['admin', 'dispatch', 'approve'],
    identity: 'chaos-admin',
  },
  {
    token: CHAOS_TOKENS.agent,
    tenant: CHAOS_TENANT,
    scopes: ['dispatch'],
    identity: 'chaos-agent',
  },
] as const;

/** A client connection to the run's broker (any of a cluster's nodes) that rides out its restarts. */
export function connectToBroker(servers: string | string[], name: string): Promise<NatsConnection> {
  return connect({ servers, name, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
}

/**
 * A team's worker for the chaos tool on its own connection: counts executions per dispatch id (the
 * tool's idempotency key) and answers after `delayMs`, so calls are in flight when a kill lands.
 */
export class CountingWorker {
  readonly executions = new Map<string, number>();
  private subs: Subscription[] = [];

  private constructor(
    private readonly nc: NatsConnection,
    private readonly delayMs: number,
  ) {}

  static async start(
    servers: string | string[],
    subjects: Subjects,
    delayMs: number,
  ): Promise<CountingWorker> {
    const worker = new CountingWorker(await connectToBroker(servers, 'chaos-worker'), delayMs);
    const serve = (tool: string) => {
      const { subject, queue } = subjects.remoteTool(CHAOS_TENANT, tool);
      return worker.nc.subscribe(subject, { queue, callback: answer });
    };
    const answer = (err: Error | null, msg: Msg) => {
      if (err) return;
      const request = JSON.parse(decoder.decode(msg.data)) as {
        dispatchId: string;
        input: unknown;
      };
      const id = request.dispatchId;
      worker.executions.set(id, (worker.executions.get(id) ?? 0) + 1);
      setTimeout(() => {
        msg.respond(encoder.encode(JSON.stringify({ ok: true, result: request.input })));
      }, worker.delayMs);
    };
    worker.subs = [serve(CHAOS_TOOL), serve(CHAOS_TOOL_AFTER)];
    await worker.nc.flush();
    return worker;
  }

  /** Dispatches that reached the tool and are not known to be settled. */
  inFlight(settled: ReadonlySet<string>): string[] {
    return [...this.executions.keys()].filter((id) => !settled.has(id));
  }

  async stop(): Promise<void> {
    for (const sub of this.subs) sub.unsubscribe();
    await this.nc.close();
  }
}

/**
 * Who has settled, as the run goes: a plain subscription to `settled` events for pacing and
 * in-flight snapshots (it may miss one while the broker restarts), with a direct read of the stream
 * as the fallback for a waiter. The final accounting reads the stream, not this.
 */
export class SettlementWatch {
  readonly settled = new Set<string>();
  /** When each dispatch was seen settled (by the subscription, or by a read when it missed it). */
  readonly settledAt = new Map<string, number>();
  private readonly waiters = new Map<string, () => void>();
  private readonly sub: Subscription;
  private readonly publisher: JournalPublisher;

  constructor(
    nc: NatsConnection,
    private readonly subjects: Subjects,
  ) {
    this.publisher = new JournalPublisher(nc, subjects, testJournalKeys());
    this.sub = nc.subscribe(subjects.journal.ofType('settled'), {
      callback: (err, msg) => {
        if (err) return;
        // <prefix>.journal.<tenant>.<runId>.<dispatchId>.settled
        const dispatchId = msg.subject.split('.')[4];
        if (dispatchId) this.mark(dispatchId);
      },
    });
  }

  private mark(dispatchId: string): void {
    if (!this.settled.has(dispatchId)) this.settledAt.set(dispatchId, Date.now());
    this.settled.add(dispatchId);
    this.waiters.get(dispatchId)?.();
    this.waiters.delete(dispatchId);
  }

  /** Resolves true once the dispatch settled, false after `timeoutMs`. */
  async waitFor(runId: string, dispatchId: string, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.settled.has(dispatchId)) {
      if (Date.now() > deadline) return false;
      await Promise.race([
        new Promise<void>((resolve) => this.waiters.set(dispatchId, resolve)),
        sleep(500),
      ]);
      if (this.settled.has(dispatchId)) break;
      try {
        if (await this.publisher.last(CHAOS_TENANT, runId, dispatchId, 'settled'))
          this.mark(dispatchId);
      } catch {
        // The broker is away: the subscription or the next read will tell.
      }
    }
    return true;
  }

  /**
   * The outcome of a settled dispatch, read from its `settled` event (undefined if none within
   * `timeoutMs`). The subscription hears a publish as the broker receives it, before the stream
   * stores it: on R3 the leader stores it once a quorum has it, so a read right after
   * {@link waitFor} heard it can still find nothing, and is tried again.
   */
  async outcome(
    runId: string,
    dispatchId: string,
    timeoutMs = 10_000,
  ): Promise<string | undefined> {
    return eventually(
      async () =>
        (await this.publisher.last(CHAOS_TENANT, runId, dispatchId, 'settled'))?.event.outcome,
      { timeoutMs, intervalMs: 100 },
    ).catch(() => undefined);
  }

  stop(): void {
    this.sub.unsubscribe();
  }
}

/** One call a chaos client makes. */
export interface ChaosCall {
  runId: string;
  callId: string;
  tool: string;
  input: unknown;
  isolation?: unknown;
}

/**
 * Submits a call through the gateway's HTTP API until the gateway takes it, as a careful client
 * does: the same runId/callId/input is the same dispatch, so a retry after a lost answer is a replay,
 * never a second call. Resolves with the dispatch id, or undefined if `giveUp()` turned true first.
 * `onRefused` hears every answer that was not a success (its HTTP status), before the retry.
 */
export async function submitUntilAccepted(
  gatewayUrl: () => string,
  call: ChaosCall,
  giveUp: () => boolean,
  onRefused?: (status: number) => void,
): Promise<string | undefined> {
  const body = JSON.stringify({
    runId: call.runId,
    callId: call.callId,
    agent: { agentType: 'chaos', label: 'chaos' },
    tool: call.tool,
    input: call.input,
    ...(call.isolation ? { isolation: call.isolation } : {}),
  });
  for (let attempt = 0; ; attempt++) {
    if (giveUp()) return undefined;
    try {
      const res = await fetch(`${gatewayUrl()}/v1/dispatches`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${CHAOS_TOKENS.agent}`,
          'content-type': 'application/json',
        },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      if (res.status >= 200 && res.status < 300) {
        const { dispatchId } = JSON.parse(text) as { dispatchId: string };
        return dispatchId;
      }
      onRefused?.(res.status);
    } catch {
      // Gateway down or the answer lost: try the same call again.
    }
    await sleep(Math.min(1000, 50 * 2 ** Math.min(attempt, 5)));
  }
}

/**
 * Closed-loop load: `clients` callers, each submitting a call and waiting for it to settle (up to
 * `settleWaitMs`) before the next, so the work in flight stays bounded whatever the kills do.
 */
export class LoadDriver {
  readonly submitted = new Map<string, { runId: string }>();
  /** When each load call was first sent (its first attempt), by dispatch id. */
  readonly submittedAt = new Map<string, number>();
  /** When the gateway answered a load call 503 (unavailable), one entry per answer. */
  readonly unavailableAt: number[] = [];
  private stopping = false;
  private readonly loops: Promise<void>[] = [];

  constructor(
    private readonly gatewayUrl: () => string,
    private readonly watch: SettlementWatch,
    private readonly options: { clients: number; settleWaitMs: number },
  ) {}

  start(): void {
    for (let c = 0; c < this.options.clients; c++) this.loops.push(this.client(c));
  }

  private async client(c: number): Promise<void> {
    const runId = `load-${c}`;
    for (let n = 0; !this.stopping; n++) {
      const sentAt = Date.now();
      const dispatchId = await submitUntilAccepted(
        this.gatewayUrl,
        { runId, callId: `call-${n}`, tool: CHAOS_TOOL, input: { client: c, n } },
        () => this.stopping,
        (status) => {
          if (status === 503) this.unavailableAt.push(Date.now());
        },
      );
      if (!dispatchId) return;
      this.submitted.set(dispatchId, { runId });
      this.submittedAt.set(dispatchId, sentAt);
      await this.watch.waitFor(runId, dispatchId, this.options.settleWaitMs);
    }
  }

  /** Stops submitting; resolves when every client has stopped. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }
}
