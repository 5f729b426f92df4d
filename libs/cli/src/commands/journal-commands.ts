import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import {
  decodeJournalEvent,
  ErrorCode,
  JOURNAL_EVENT_TYPES,
  ToolgateError,
  type JournalEvent,
  type ServiceKeys,
} from '@toolgate/contracts';
import { connectBus, type BusConnection } from '../bus/bus-connection';
import { renderTable, shortJson } from '../format/table-format';
import type { CommandContext } from '../run-cli';
import { parseCount, parseDuration, UsageError } from './cli-input';

/** What `journal stats` prints with `--json`. */
export interface JournalStats {
  stream: {
    name: string;
    messages: number;
    bytes: number;
    firstSeq: number;
    lastSeq: number;
    firstAt: string | null;
    lastAt: string | null;
  };
  deadLetters: number;
  tenant?: string;
  /** Messages of each event type (of `tenant`, when given). */
  eventsByType: Record<string, number>;
  /** Each durable consumer: messages not yet delivered (lag), delivered but not acknowledged. */
  consumers: {
    name: string;
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
          let filter: string;
          try {
            filter = bus.subjects.journal.matching(opts.tenant ?? '*', opts.run ?? '*');
          } catch (err) {
            throw new UsageError((err as Error).message);
          }
          const { DeliverPolicy } = await import('@nats-io/jetstream');
          await assertStream(bus);
          const consumer = await bus.js.consumers.get(bus.subjects.journal.stream, {
            filter_subjects: filter,
            ...(since
              ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: since.toISOString() }
              : { deliver_policy: DeliverPolicy.New }),
          });
          const messages = await consumer.consume({ max_messages: 256 });
          const stop = () => messages.stop();
          ctx.signal.addEventListener('abort', stop);
          // Shown either way; marked when not signed by its producer, or unverified without keys.
          let keys: ServiceKeys | undefined;
          try {
            keys = bus.keys();
          } catch {
            ctx.note('no signing keys for ops: events are shown unverified\n');
          }
          ctx.note(`following ${filter} (Ctrl-C to stop)\n`);
          let seen = 0;
          try {
            if (count === 0) return;
            for await (const m of messages) {
              const event = decodeJournalEvent(m.data);
              const untrusted = keys
                ? keys.verifyEvent(m.subject, m.data, m.headers)
                : 'unverified';
              const mark = untrusted
                ? ` [${untrusted === 'unverified' ? 'unverified' : `untrusted: ${untrusted}`}]`
                : '';
              ctx.out(
                opts.json
                  ? `${JSON.stringify({
                      seq: m.seq,
                      subject: m.subject,
                      event: event ?? null,
                      trusted: untrusted === null,
                      ...(untrusted ? { untrusted } : {}),
                    })}\n`
                  : `${describeEvent(m.seq, m.subject, event)}${mark}\n`,
              );
              if (++seen >= count) break;
            }
          } finally {
            ctx.signal.removeEventListener('abort', stop);
            messages.stop();
          }
        });
      },
    );

  journal
    .command('stats')
    .description("the journal stream's size, its events by type, and each consumer's lag")
    .option('--tenant <tenant>', "count only this tenant's events by type")
    .option('--json', 'print JSON')
    .action(async (opts: { tenant?: string; json?: boolean }) => {
      const stats = await withBus(ctx, (bus) => journalStats(bus, opts.tenant));
      if (opts.json) return ctx.out(`${JSON.stringify(stats, null, 2)}\n`);
      const n = (x: number) => x.toLocaleString('en-US');
      const s = stats.stream;
      const lines = [
        `journal stream ${s.name}: ${n(s.messages)} messages, ${humanBytes(s.bytes)}` +
          (s.messages > 0
            ? `, sequences ${s.firstSeq}-${s.lastSeq} (${s.firstAt} to ${s.lastAt})`
            : ''),
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
            c.name,
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
        `rebuilt ${report.events.toLocaleString('en-US')} events (up to stream sequence ${report.lastSeq}) into ${report.into}` +
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

async function assertStream(bus: BusConnection): Promise<void> {
  try {
    await bus.jsm.streams.info(bus.subjects.journal.stream);
  } catch (err) {
    // JetStream's "stream not found" (10059), read by code: the class lives in the lazily loaded client.
    if ((err as { name?: string; code?: number })?.code === 10059)
      throw new ToolgateError(
        ErrorCode.NotFound,
        `no journal stream ${bus.subjects.journal.stream} (is TOOLGATE_PREFIX right?)`,
      );
    throw err;
  }
}

async function journalStats(bus: BusConnection, tenant: string | undefined): Promise<JournalStats> {
  const { AckPolicy, DeliverPolicy } = await import('@nats-io/jetstream');
  const { nanos } = await import('@nats-io/transport-node');
  const stream = bus.subjects.journal.stream;
  await assertStream(bus);
  const info = await bus.jsm.streams.info(stream);
  const deadLetters = await bus.jsm.streams
    .info(bus.subjects.deadLetter.stream)
    .then((i) => i.state.messages)
    .catch(() => 0);
  // nats-server 2.9 counts a filter's messages when a consumer is created on it: an ephemeral
  // consumer per type, deleted at once (and gone on its own if this process dies).
  const counts = await Promise.all(
    JOURNAL_EVENT_TYPES.map(async (type) => {
      let filter: string;
      try {
        filter = tenant
          ? bus.subjects.journal.ofTypeIn(type, tenant, '*')
          : bus.subjects.journal.ofType(type);
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      const ci = await bus.jsm.consumers.add(stream, {
        // A name of its own: an operator's NATS user may create consumers only under a name in
        // the API subject, never the durable ones' (docs/cli.md, deploy/nats/nats.conf).
        name: `stats-${randomBytes(8).toString('hex')}`,
        ack_policy: AckPolicy.None,
        deliver_policy: DeliverPolicy.All,
        filter_subject: filter,
        inactive_threshold: nanos(30_000),
        mem_storage: true,
        num_replicas: 1,
      });
      await bus.jsm.consumers.delete(stream, ci.name).catch(() => undefined);
      return [type, ci.num_pending] as const;
    }),
  );
  const consumers: JournalStats['consumers'] = [];
  for await (const ci of bus.jsm.consumers.list(stream)) {
    if (!ci.config.durable_name) continue;
    consumers.push({
      name: ci.name,
      lag: ci.num_pending,
      inFlight: ci.num_ack_pending,
      redelivered: ci.num_redelivered,
      ackFloor: ci.ack_floor.stream_seq,
    });
  }
  consumers.sort((a, b) => (a.name < b.name ? -1 : 1));
  const s = info.state;
  return {
    stream: {
      name: stream,
      messages: s.messages,
      bytes: s.bytes,
      firstSeq: s.first_seq,
      lastSeq: s.last_seq,
      firstAt: s.messages > 0 ? s.first_ts : null,
      lastAt: s.messages > 0 ? s.last_ts : null,
    },
    deadLetters,
    ...(tenant ? { tenant } : {}),
    eventsByType: Object.fromEntries(counts),
    consumers,
  };
}

/** One event as a line: when, where, what. */
function describeEvent(seq: number, subject: string, e: JournalEvent | null): string {
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
