import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerConfig,
} from '@nats-io/jetstream';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { useTestNats, useTestSchema, type TestNats, type TestSchema } from '@toolgate/testing';
import { BenchStack, TENANT } from './bench-stack';
import { benchLatency, untilProjected, warmUp } from './dispatch';
import { BENCH_CONNECTION, percentile, phase, round, since } from './stats';

export interface GrowthResult {
  /** Events in the journal stream before the second measurement (1,000,000; 20,000 quick). */
  events: number;
  /** Dispatch p50 on an empty journal stream, then with `events` already in it. */
  p50EmptyMs: number;
  p50FullMs: number;
  p99EmptyMs: number;
  p99FullMs: number;
  /** `p50FullMs / p50EmptyMs` (goal ≤ 1.2). */
  p50GrowthAt1M: number;
  /** Sequential dispatches timed on each stream, in alternating blocks of `block`. */
  samples: number;
  block: number;
  /** Untimed sequential dispatches on each stack before the first block (both at once). */
  warmupDispatches: number;
  /** How long filling the stream (raw publishes) and the projection (SQL) took (at once), seconds. */
  fillSeconds: number;
  seedSeconds: number;
}

/** The four events of one settled dispatch, as the services wrote them, to copy from. */
interface Template {
  dispatchId: string;
  runId: string;
  events: { type: string; subject: string; body: string; headers: MsgHdrs | undefined }[];
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A dispatch id of the fill (the format of `dispatchKey`: `d` and 40 hex digits). */
function fillDispatchId(k: number): string {
  return `d${createHash('sha256').update(`fill-${k}`).digest('hex').slice(0, 40)}`;
}

/** Dispatches per run in the fill. */
const RUN_SIZE = 1000;

/**
 * Cost as history grows: dispatch latency with `events` in the journal stream against an empty
 * one, each on a stream, schema and all-in-one of its own, measured in alternating blocks. The
 * full one is made by a stack that runs a few dispatches and stops; its stream is then filled with raw publishes of the events of settled dispatches — copies of a real
 * one (requested, decided, started, settled with the services' own bodies and headers), each with
 * a dispatch id and run of its own — the projection is given the same history in SQL (audit rows,
 * dispatch rows, run rows, as folding them would leave it), and every durable consumer is moved
 * past the fill (as if the services had processed it); then it is started again. Everything a dispatch does that could slow down with history — direct
 * gets by subject, once-per-dispatch expectations, filtered consumers, projection upserts and
 * their indexes — runs against the full stream and tables. The empty side's stream, schema and
 * stack are set up beside all that, and the two stacks' warm-ups run at the same time.
 */
export async function benchGrowth(opts: {
  quick: boolean;
  /** Called once the samples are taken, before the stacks stop and the streams are removed. */
  measured?: () => void;
}): Promise<GrowthResult> {
  // Quick: a smaller fill, enough for the stream's and the tables' lookups to be past their
  // first pages and indexes (the ratio is of the same run; its size is in the report).
  const events = opts.quick ? 20_000 : 1_000_000;
  const samples = opts.quick ? 100 : 600;
  // Quick: shorter blocks, so the two stacks alternate as often as in a full run's first 200.
  const block = opts.quick ? 25 : 50;
  const warmup = opts.quick ? 50 : 300;
  const opened: { cleanup(): Promise<void> }[] = [];
  const stacks: BenchStack[] = [];
  const startOn = async (nats: TestNats, schema: TestSchema) => {
    const stack = await BenchStack.start(nats, schema, { shape: 'all-in-one' });
    stacks.push(stack);
    return stack;
  };
  // The empty side (its stream, schema and stack) is set up beside the full one's preparation:
  // none of it is measured, and it touches neither the full stream nor its schema.
  const emptySide = (async () => {
    const nats = await useTestNats('bench-empty', BENCH_CONNECTION);
    opened.push(nats);
    const schema = await useTestSchema('bench-empty');
    opened.push(schema);
    return { nats, stack: await startOn(nats, schema) };
  })();
  emptySide.catch(() => undefined);
  try {
    const full = await useTestNats('bench-full', BENCH_CONNECTION);
    opened.push(full);
    const fullSchema = await useTestSchema('bench-full');
    opened.push(fullSchema);
    // A few real dispatches on the stream to be filled: the template, and the consumers' state.
    await phase('template dispatches', async () => {
      const first = await BenchStack.start(full, fullSchema, { shape: 'all-in-one' });
      try {
        await benchLatency(first, full, { samples: 20, warmup: 0, runId: 'template', raw: true });
        await untilProjected(full, 60_000);
      } finally {
        await first.stop();
      }
    });
    const template = await readTemplate(full, 'template');
    // The stream and the tables are filled at the same time (the broker's work and the database's,
    // neither measured): the fill's first sequence is known before it starts, as nothing else
    // publishes to the stream, which `fillStream` checks.
    const before = (await full.jsm.streams.info(full.subjects.journal.stream)).state;
    const firstSeq = before.last_seq + 1;
    const timed = async (what: string, fn: () => Promise<void>) => {
      const t = performance.now();
      await phase(what, fn);
      return since(t) / 1000;
    };
    const [fillSeconds, seedSeconds] = await Promise.all([
      timed('fill', () => fillStream(full, template, events / 4, before)),
      timed('projection seed (beside the fill)', () =>
        seedProjection(fullSchema, template, events / 4, firstSeq),
      ),
    ]);
    await phase('consumers moved past the fill', () => moveConsumersPastFill(full));

    const onFull = await phase('stack start on the full stream', () => startOn(full, fullSchema));
    const { nats: empty, stack: onEmpty } = await emptySide;
    // Both stacks in this process, measured in alternating blocks, so a change in the machine's
    // load during the phase weighs on both alike.
    const times = { empty: [] as number[], full: [] as number[] };
    const pair = [
      ['empty', onEmpty, empty],
      ['full', onFull, full],
    ] as const;
    // Each stack's untimed warm-up, right before the first block; the two at once (each one's
    // dispatches one at a time, as in its blocks).
    await phase('warm-up (the two stacks at once)', () =>
      Promise.all(pair.map(([name, stack, nats]) => warmUp(stack, nats, warmup, `${name}-warmup`))),
    );
    await phase('samples', async () => {
      for (let done = 0; done < samples; done += block) {
        // ABBA order: neither stream always runs right after the other.
        for (const [name, stack, nats] of (done / block) % 2 ? [...pair].reverse() : pair) {
          const r = await benchLatency(stack, nats, {
            samples: block,
            warmup: 0,
            runId: `${name}-${done}`,
            raw: true,
          });
          times[name].push(...r.raw!);
        }
      }
    });
    opts.measured?.();
    const p = (v: number[], q: number) => round(percentile(v, q));
    return {
      events,
      p50EmptyMs: p(times.empty, 50),
      p50FullMs: p(times.full, 50),
      p99EmptyMs: p(times.empty, 99),
      p99FullMs: p(times.full, 99),
      p50GrowthAt1M: round(percentile(times.full, 50) / percentile(times.empty, 50), 3),
      samples,
      block,
      warmupDispatches: warmup,
      fillSeconds: round(fillSeconds, 1),
      seedSeconds: round(seedSeconds, 1),
    };
  } finally {
    await emptySide.catch(() => undefined);
    // The two stacks, then the streams and schemas, each at once (nothing is measured any more).
    await phase('clean-up', async () => {
      await Promise.all(stacks.map((s) => s.stop().catch(() => undefined)));
      await Promise.all(opened.map((o) => o.cleanup().catch(() => undefined)));
    });
  }
}

/** The journal events of the last dispatch of `runId`, read back from the stream. */
async function readTemplate(nats: TestNats, runId: string): Promise<Template> {
  const jsm = await jetstream(nats.nc).jetstreamManager();
  const stream = nats.subjects.journal.stream;
  const settled = await jsm.direct.getMessage(stream, {
    last_by_subj: `${nats.subjects.prefix}.journal.${TENANT}.${runId}.*.settled`,
  });
  if (!settled) throw new Error(`no settled dispatch in run ${runId} to copy`);
  const dispatchId = settled.subject.split('.').at(-2)!;
  const events: Template['events'] = [];
  for (const type of ['requested', 'decided', 'started', 'settled']) {
    const subject = nats.subjects.journal.event(TENANT, runId, dispatchId, type as 'settled');
    const msg = await jsm.direct.getMessage(stream, { last_by_subj: subject });
    if (!msg) throw new Error(`dispatch ${dispatchId} has no ${type} to copy`);
    events.push({ type, subject, body: decoder.decode(msg.data), headers: msg.header });
  }
  return { dispatchId, runId, events };
}

/**
 * Publishes `dispatches` copies of the template's four events, in order, with no other publisher
 * on the stream, the first at `before.last_seq + 1`. Core publishes in windows with a flush
 * between (the broker stores them as it reads them), checked against the stream's count at the end.
 */
async function fillStream(
  nats: TestNats,
  template: Template,
  dispatches: number,
  before: { messages: number; last_seq: number },
): Promise<void> {
  const stream = nats.subjects.journal.stream;
  const firstSeq = before.last_seq + 1;
  const window = 5000;
  for (let k = 0; k < dispatches; k++) {
    const dispatchId = fillDispatchId(k);
    const runId = `fill-${Math.floor(k / RUN_SIZE)}`;
    for (const e of template.events) {
      const swap = (s: string) =>
        s
          .replaceAll(template.dispatchId, dispatchId)
          .replaceAll(`"${template.runId}"`, `"${runId}"`);
      const subject = e.subject
        .replace(`.${template.runId}.`, `.${runId}.`)
        .replace(template.dispatchId, dispatchId);
      const h = natsHeaders();
      for (const [key, values] of e.headers ?? []) {
        if (key.startsWith('Nats-')) continue;
        for (const v of values) h.append(key, swap(v));
      }
      nats.nc.publish(subject, encoder.encode(swap(e.body)), { headers: h });
    }
    if ((k + 1) % window === 0) await nats.nc.flush();
  }
  await nats.nc.flush();
  // Wait for the broker to have stored everything it was sent.
  const expected = before.messages + dispatches * 4;
  for (let i = 0; ; i++) {
    const state = (await nats.jsm.streams.info(stream)).state;
    if (state.messages >= expected) {
      if (state.last_seq !== firstSeq + dispatches * 4 - 1)
        throw new Error(
          `the fill was interleaved with other publishes (last seq ${state.last_seq})`,
        );
      return;
    }
    if (i > 600) throw new Error(`the stream holds ${state.messages} of ${expected} messages`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Gives the projection the fill's history, as folding it would: one audit row per event at its
 * stream sequence, a settled dispatch row per dispatch and a row per run — copied in SQL from
 * the template dispatch's own rows, with the same ids as the stream's copies.
 */
async function seedProjection(
  schema: TestSchema,
  template: Template,
  dispatches: number,
  firstSeq: number,
): Promise<void> {
  const client = await schema.pool.connect();
  const id = `'d' || left(encode(sha256(convert_to('fill-' || g, 'UTF8')), 'hex'), 40)`;
  const run = `'fill-' || (g / ${RUN_SIZE})`;
  const swap = (col: string) =>
    `replace(replace(${col}, $1::text, ${id}), '"' || $2::text || '"', '"' || ${run} || '"')`;
  try {
    await client.query('begin');
    await client.query(
      `insert into audit_log (stream, seq, event_id, type, tenant, run_id, dispatch_id, at, event)
       select a.stream, $3::bigint + g * 4 + k.n, ${swap('a.event_id')}, a.type, a.tenant,
              ${run}, ${id}, a.at, ${swap('a.event::text')}::jsonb
       from generate_series(0, $4::int - 1) g
       cross join (values ('requested', 0), ('decided', 1), ('started', 2), ('settled', 3)) k(type, n)
       join audit_log a on a.dispatch_id = $1::text and a.type = k.type`,
      [template.dispatchId, template.runId, firstSeq, dispatches],
    );
    const columns = (
      await client.query<{ column_name: string }>(
        `select column_name from information_schema.columns
         where table_schema = current_schema() and table_name = 'dispatches' order by ordinal_position`,
      )
    ).rows.map((r) => r.column_name);
    const select = columns.map((c) =>
      c === 'dispatch_id'
        ? id
        : c === 'run_id'
          ? run
          : c === 'last_seq'
            ? `$3::bigint + g * 4 + 3`
            : `d.${c}`,
    );
    await client.query(
      `insert into dispatches (${columns.join(', ')})
       select ${select.join(', ')}
       from generate_series(0, $4::int - 1) g
       join dispatches d on d.dispatch_id = $1::text and d.run_id = $2::text`,
      [template.dispatchId, template.runId, firstSeq, dispatches],
    );
    await client.query(
      `insert into runs (tenant, run_id, first_at, last_at, event_count, last_seq)
       select r.tenant, 'fill-' || g, r.first_at, r.last_at, ${RUN_SIZE * 4},
              $2::bigint + ((g + 1) * ${RUN_SIZE}) * 4 - 1
       from generate_series(0, ($3::int - 1) / ${RUN_SIZE}) g
       join runs r on r.run_id = $1::text`,
      [template.runId, firstSeq, dispatches],
    );
    await client.query('commit');
    await client.query('analyze');
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/**
 * Recreates every durable consumer of the journal stream to start after its last message, with its
 * configuration otherwise unchanged: the services then start where they would be had they
 * processed the fill (the evaluator does not decide copies of requests, the projection does not
 * fold again what `seedProjection` wrote).
 */
async function moveConsumersPastFill(nats: TestNats): Promise<void> {
  const stream = nats.subjects.journal.stream;
  // Listing consumers makes the broker count each filtered consumer's pending messages over the
  // whole filled stream: longer than the client's default 5 s on a busy machine.
  const jsm = await jetstreamManager(nats.nc, { timeout: 120_000 });
  const { last_seq } = (await jsm.streams.info(stream)).state;
  const configs: ConsumerConfig[] = [];
  for await (const ci of jsm.consumers.list(stream)) {
    if (ci.config.durable_name) configs.push(ci.config);
  }
  for (const config of configs) {
    await jsm.consumers.delete(stream, config.durable_name!);
    await jsm.consumers.add(stream, {
      ...config,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: last_seq + 1,
    });
  }
}
