import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import {
  decodeJournalEvent,
  ErrorCode,
  JOURNAL_EVENT_TYPES,
  ToolgateError,
  type JournalEvent,
  type JournalPartition,
  type ServiceKeys,
  type Subjects,
} from '@toolgate/contracts';
import { connectBus, type BusConnection } from '../bus/bus-connection';
import { renderTable, shortJson } from '../format/table-format';
import type { CommandContext } from '../run-cli';
import { parseCount, parseDuration, UsageError } from './cli-input';

/** One stream of the journal, as `journal stats` counts it. */
export interface JournalStreamStats {
  name: string;
  messages: number;
  bytes: number;
  firstSeq: number;
  lastSeq: number;
  firstAt: string | null;
  lastAt: string | null;
}

/** What `journal stats` prints with `--json`. */
export interface JournalStats {
  /** The journal's one stream (absent when it is partitioned: see `streams`). */
  stream?: JournalStreamStats;
  /** Each stream read: the one, every partition's, or the tenant's partition's with `--tenant`. */
  streams: JournalStreamStats[];
  /** How many partitions the journal has (`TOOLGATE_JOURNAL_PARTITIONS`; 1: unpartitioned). */
  partitions: number;
  deadLetters: number;
  tenant?: string;
  /** Messages of each event type (of `tenant`, when given), over the streams read. */
  eventsByType: Record<string, number>;
  /**
   * Each durable consumer: messages not yet delivered (lag), delivered but not acknowledged. On a
   * partitioned journal each partition's stream has its own, named with its `stream`.
   */
  consumers: {
    name: string;
    stream?: string;
    lag: number;
    inFlight: number;
    redelivered: number;
    ackFloor: number;
  }[];
}

/**
 * `toolgate journal tail | stats | rebuild`: operators' tools on the bus. They read the journal
 * stream and its consumers with JetStream's API and ask the journal service to rebuild, as a NATS
 * user of the operator's (`NATS_URL`, `NATS_USER`, `NATS_PASSWORD`, `TOOLGATE_PREFIX`), not
 * through the gateway: they span every tenant, and the gateway's tokens are a tenant's.
 */
export function registerJournalCommands(program: Command, ctx: CommandContext): void {
  const journal = program
    .command('journal')
    .description(
      "the journal stream, for operators: follow it, count it, rebuild the projection (on the bus, with an operator's NATS user)",
    );

  journal
    .command('tail')
    .description('follow journal events as they are appended, until Ctrl-C')
    .option('--tenant <tenant>', "only this tenant's events")
    .option('--run <runId>', "only this run's events")
    .option('--since <duration>', 'start this far back (30s, 10m, 2h) instead of now')
    .option('--count <n>', 'stop after this many events')
    .option(
      '--json',
      'one JSON line per event: { seq, subject, event, trusted } (and why not: untrusted)',
    )
    .action(
      async (opts: {
        tenant?: string;
        run?: string;
        since?: string;
        count?: string;
        json?: boolean;
      }) => {
        const since =
          opts.since === undefined
            ? undefined
            : new Date(ctx.now().getTime() - parseDuration('--since', opts.since));
        const count = opts.count === undefined ? Infinity : parseCount('--count', opts.count);
        await withBus(ctx, async (bus) => {
          const subjects = await bus.journalSubjects();
          const partitioned = subjects.journal.partitionCount > 1;
          const read = partitionsRead(subjects, opts.tenant).map((partition) => ({
            partition,
            filter: tailFilter(subjects, partition, opts.tenant, opts.run),
          }));
          const { DeliverPolicy } = await import('@nats-io/jetstream');
          await assertStreams(
            bus,
            read.map(({ partition }) => partition.stream),
          );
          // A partitioned journal is followed stream by stream, all at once: each in its order.
          const followed = await Promise.all(
            read.map(async ({ partition, filter }) => {
              // Made again until it is (see `throughOutage`).
              const messages = await throughOutage(async () => {
                const consumer = await bus.js.consumers.get(partition.stream, {
                  filter_subjects: filter,
                  ...(since
                    ? {
                        deliver_policy: DeliverPolicy.StartTime,
                        opt_start_time: since.toISOString(),
                      }
                    : { deliver_policy: DeliverPolicy.New }),
                });
                return consumer.consume({ max_messages: 256 });
              });
              return { partition, messages };
            }),
          );
          const stop = () => followed.forEach(({ messages }) => messages.stop());
          ctx.signal.addEventListener('abort', stop);
          // Shown either way; marked when not signed by its producer, or unverified without keys.
          let keys: ServiceKeys | undefined;
          try {
            keys = bus.keys();
          } catch {
            ctx.note('no signing keys for ops: events are shown unverified\n');
          }
          ctx.note(`following ${read.map(({ filter }) => filter).join(', ')} (Ctrl-C to stop)\n`);
          let seen = 0;
          try {
            if (count === 0) return;
            await Promise.all(
              followed.map(async ({ partition, messages }) => {
                for await (const m of messages) {
                  if (seen >= count) break;
                  const event = decodeJournalEvent(m.data);
                  const untrusted = keys
                    ? keys.verifyEvent(m.subject, m.data, m.headers)
                    : 'unverified';
                  const mark = untrusted
                    ? ` [${untrusted === 'unverified' ? 'unverified' : `untrusted: ${untrusted}`}]`
                    : '';
                  // A sequence is its stream's: on a partitioned journal it is named with it.
                  const at = partitioned ? `${partition.index}:${m.seq}` : String(m.seq);
                  ctx.out(
                    opts.json
                      ? `${JSON.stringify({
                          seq: m.seq,
                          stream: partition.stream,
                          subject: m.subject,
                          event: event ?? null,
                          trusted: untrusted === null,
                          ...(untrusted ? { untrusted } : {}),
                        })}\n`
                      : `${describeEvent(at, m.subject, event)}${mark}\n`,
                  );
                  if (++seen >= count) {
                    stop();
                    break;
                  }
                }
              }),
            );
          } finally {
            ctx.signal.removeEventListener('abort', stop);
            stop();
          }
        });
      },
    );

  journal
    .command('stats')
    .description(
      "the journal's streams (each partition's) with their sizes, its events by type, and each consumer's lag",
    )
    .option('--tenant <tenant>', "count only this tenant's events by type")
    .option('--json', 'print JSON')
    .action(async (opts: { tenant?: string; json?: boolean }) => {
      const stats = await withBus(ctx, (bus) => journalStats(bus, opts.tenant));
      if (opts.json) return ctx.out(`${JSON.stringify(stats, null, 2)}\n`);
      const n = (x: number) => x.toLocaleString('en-US');
      const lines = [
        ...stats.streams.map(
          (s) =>
            `journal stream ${s.name}: ${n(s.messages)} messages, ${humanBytes(s.bytes)}` +
            (s.messages > 0
              ? `, sequences ${s.firstSeq}-${s.lastSeq} (${s.firstAt} to ${s.lastAt})`
              : ''),
        ),
        `dead letters: ${n(stats.deadLetters)}`,
        '',
        `events by type${stats.tenant ? ` (tenant ${stats.tenant})` : ''}:`,
        renderTable(
          ['TYPE', 'EVENTS'],
          Object.entries(stats.eventsByType).map(([type, count]) => [type, n(count)]),
        ).trimEnd(),
        '',
        'consumers (LAG: not yet delivered; IN FLIGHT: delivered, not acknowledged):',
        renderTable(
          ['CONSUMER', 'LAG', 'IN FLIGHT', 'REDELIVERED', 'ACK FLOOR'],
          stats.consumers.map((c) => [
            c.stream ? `${c.name} (${c.stream})` : c.name,
            n(c.lag),
            n(c.inFlight),
            n(c.redelivered),
            String(c.ackFloor),
          ]),
        ).trimEnd(),
      ];
      ctx.out(`${lines.join('\n')}\n`);
    });

  journal
    .command('rebuild')
    .description(
      'rebuild the projection from the stream into a schema of its own, check it equals the live one, and switch to it (the journal service does it; exit 1 when it did not switch)',
    )
    .option('--into <schema>', 'the schema to rebuild into (default: the live one + _rebuild)')
    .option('--force', 'switch even when the rebuilt projection differs (after a fold was fixed)')
    .option('--json', 'print the report as JSON')
    .action(async (opts: { into?: string; force?: boolean; json?: boolean }) => {
      const report = await withBus(ctx, async (bus) => {
        const bar = await ctx.progress('rebuilding');
        try {
          // Loaded here, as the client is: commands that do not use the bus do not pay for it.
          const { requestJournalRebuild } = await import('@toolgate/bus');
          return await requestJournalRebuild(
            bus.nc,
            bus.subjects,
            bus.keys(),
            { ...(opts.into ? { into: opts.into } : {}), ...(opts.force ? { force: true } : {}) },
            { onProgress: (frame) => bar?.update(frame.done, frame.total) },
          );
        } finally {
          bar?.stop();
        }
      });
      if (!report.switched) ctx.fail();
      if (opts.json) return ctx.out(`${JSON.stringify(report, null, 2)}\n`);
      const lines = [
        `rebuilt ${report.events.toLocaleString('en-US')} events (${
          report.partitions
            ? `up to ${report.partitions.map((p) => `${p.stream}:${p.lastSeq}`).join(', ')}`
            : `up to stream sequence ${report.lastSeq}`
        }) into ${report.into}` +
          (report.skipped > 0 ? `; ${report.skipped} messages were not events` : ''),
        report.switched
          ? `switched: ${report.live} now serves the rebuilt projection; ${report.into} holds the one it replaced`
          : `not switched: ${report.reason ?? 'it differs from the live projection'}`,
      ];
      if (report.differences.length > 0) {
        lines.push(
          renderTable(
            ['TABLE', 'ONLY IN LIVE', 'ONLY IN REBUILT'],
            report.differences.map((d) => [d.table, String(d.onlyInLive), String(d.onlyInRebuilt)]),
          ).trimEnd(),
        );
      }
      ctx.out(`${lines.join('\n')}\n`);
    });
}

/** Runs `fn` on a bus connection of its own, closed afterwards whatever happens. */
async function withBus<T>(ctx: CommandContext, fn: (bus: BusConnection) => Promise<T>): Promise<T> {
  const bus = await connectBus(ctx.busSettings());
  try {
    return await fn(bus);
  } catch (err) {
    // A broker that went away mid-command is the same answer as one that was never there.
    if ((err as Error)?.name === 'ConnectionError' || (err as Error)?.name === 'TimeoutError')
      throw new ToolgateError(
        ErrorCode.Unavailable,
        `NATS stopped answering: ${(err as Error).message}`,
      );
    throw err;
  } finally {
    await bus.close();
  }
}

/**
 * A JetStream API call of an operator's command, asked again while the cluster rides out a node's
 * loss: a stream or the meta group electing a leader, or an ephemeral consumer placed on the dead
 * node (see `apiThroughElection`). Only for reads and calls that are harmless to repeat.
 */
async function throughOutage<T>(call: () => Promise<T>): Promise<T> {
  const { apiThroughElection } = await import('@toolgate/bus');
  return apiThroughElection(call);
}

/** Fails with `not-found` naming the first of `streams` that does not exist. */
async function assertStreams(bus: BusConnection, streams: readonly string[]): Promise<void> {
  for (const stream of streams) {
    try {
      await throughOutage(() => bus.jsm.streams.info(stream));
    } catch (err) {
      // JetStream's "stream not found" (10059), read by code: the class lives in the lazily loaded client.
      if ((err as { name?: string; code?: number })?.code === 10059)
        throw new ToolgateError(
          ErrorCode.NotFound,
          `no journal stream ${stream} (is TOOLGATE_PREFIX right?)`,
        );
      throw err;
    }
  }
}

/** The partitions a command reads: the tenant's, or every one (one, unpartitioned). */
function partitionsRead(
  subjects: Subjects,
  tenant: string | undefined,
): readonly JournalPartition[] {
  try {
    return tenant ? [subjects.journal.partitionOf(tenant)] : subjects.journal.partitions;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** What `tail` follows in one partition's stream: a tenant's (and run's) events, or any tenant's. */
function tailFilter(
  subjects: Subjects,
  partition: JournalPartition,
  tenant: string | undefined,
  run: string | undefined,
): string {
  let filter: string;
  try {
    filter = subjects.journal.matching(tenant ?? '*', run ?? '*');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (tenant || subjects.journal.partitionCount === 1) return filter;
  // Any tenant spans every partition's subjects; a consumer takes its own stream's only.
  return `${partition.all.slice(0, -'.>'.length)}.*.${run ?? '*'}.>`;
}

async function journalStats(bus: BusConnection, tenant: string | undefined): Promise<JournalStats> {
  const { AckPolicy, DeliverPolicy, jetstreamManager } = await import('@nats-io/jetstream');
  const { nanos } = await import('@nats-io/transport-node');
  const subjects = await throughOutage(() => bus.journalSubjects());
  const partitions = partitionsRead(subjects, tenant);
  await assertStreams(
    bus,
    partitions.map((p) => p.stream),
  );
  // No dead-letter stream yet is none dead-lettered; a broker that does not answer is not.
  const deadLetters = await throughOutage(() =>
    bus.jsm.streams.info(bus.subjects.deadLetter.stream),
  )
    .then((i) => i.state.messages)
    .catch((err: unknown) => {
      if ((err as { code?: number })?.code === 10059) return 0;
      throw err;
    });
  // The counting consumers' own manager: a short timeout, as a third of their creations time out
  // while a node is down (below).
  const counting = await jetstreamManager(bus.nc, { timeout: 2_000, checkAPI: false });
  const streams: JournalStreamStats[] = [];
  const eventsByType: Record<string, number> = Object.fromEntries(
    JOURNAL_EVENT_TYPES.map((type) => [type, 0]),
  );
  const consumers: JournalStats['consumers'] = [];
  // The partitions side by side: while a node is down each waits out its own election.
  const perPartition = partitions.map(async (partition) => {
    const stream = partition.stream;
    const s = (await throughOutage(() => bus.jsm.streams.info(stream))).state;
    const streamStats: JournalStreamStats = {
      name: stream,
      messages: s.messages,
      bytes: s.bytes,
      firstSeq: s.first_seq,
      lastSeq: s.last_seq,
      firstAt: s.messages > 0 ? s.first_ts : null,
      lastAt: s.messages > 0 ? s.last_ts : null,
    };
    // nats-server 2.9 counts a filter's messages when a consumer is created on it: an ephemeral
    // consumer per type, deleted at once (and gone on its own if this process dies). The broker
    // places such a consumer on any of the stream's peers, a dead one too: while a node is down a
    // third of them never answer, and each is made again (under a new name) until it is.
    await Promise.all(
      JOURNAL_EVENT_TYPES.map(async (type) => {
        const ci = await throughOutage(() =>
          counting.consumers.add(stream, {
            // A name of its own: an operator's NATS user may create consumers only under a name
            // in the API subject, never the durable ones' (docs/cli.md, deploy/nats/nats.conf).
            name: `stats-${randomBytes(8).toString('hex')}`,
            ack_policy: AckPolicy.None,
            deliver_policy: DeliverPolicy.All,
            filter_subject: tenant
              ? subjects.journal.ofTypeIn(type, tenant, '*')
              : partition.ofType(type),
            inactive_threshold: nanos(30_000),
            mem_storage: true,
            num_replicas: 1,
          }),
        );
        await counting.consumers.delete(stream, ci.name).catch(() => undefined);
        eventsByType[type]! += ci.num_pending;
      }),
    );
    const listed = await throughOutage(async () => {
      const all = [];
      for await (const ci of bus.jsm.consumers.list(stream)) all.push(ci);
      return all;
    });
    return { streamStats, listed };
  });
  for (const { streamStats, listed } of await Promise.all(perPartition)) {
    const stream = streamStats.name;
    streams.push(streamStats);
    for (const ci of listed) {
      if (!ci.config.durable_name) continue;
      consumers.push({
        name: ci.name,
        ...(subjects.journal.partitionCount > 1 ? { stream } : {}),
        lag: ci.num_pending,
        inFlight: ci.num_ack_pending,
        redelivered: ci.num_redelivered,
        ackFloor: ci.ack_floor.stream_seq,
      });
    }
  }
  const order = (c: JournalStats['consumers'][number]) => `${c.name} ${c.stream ?? ''}`;
  consumers.sort((a, b) => (order(a) < order(b) ? -1 : 1));
  return {
    ...(subjects.journal.partitionCount === 1 ? { stream: streams[0]! } : {}),
    streams,
    partitions: subjects.journal.partitionCount,
    deadLetters,
    ...(tenant ? { tenant } : {}),
    eventsByType,
    consumers,
  };
}

/** One event as a line: when, where, what. */
function describeEvent(seq: string, subject: string, e: JournalEvent | null): string {
  if (e === null) return `${seq} ${subject} (not an event this release can read)`;
  const head = `${seq} ${e.at} ${e.tenant}/${e.runId} ${e.dispatchId} ${e.type}`;
  switch (e.type) {
    case 'requested':
      return `${head} ${e.tool.name} ${shortJson(e.input, 80)} by ${e.submittedBy}`;
    case 'decided':
      return `${head} ${e.verdict} by ${e.decidedBy}${e.rule !== undefined ? ` ${shortJson(e.rule, 80)}` : ''}${e.reason ? `: ${e.reason}` : ''}`;
    case 'suspended':
      return `${head} approval ${e.approvalKey.slice(0, 12)}… until ${e.expiresAt} (then ${e.onTimeout})`;
    case 'resolved':
      return `${head} ${e.decision} by ${e.by} (${e.source})${e.reason ? `: ${e.reason}` : ''}`;
    case 'started':
      return `${head} ${e.toolName} attempt ${e.attempt} (${e.executor})`;
    case 'settled':
      return `${head} ${e.outcome}${e.error ? ` ${e.error.code}: ${e.error.message}` : ''} in ${e.durationMs} ms`;
    default:
      return head;
  }
}

function humanBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
