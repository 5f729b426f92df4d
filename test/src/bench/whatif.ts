import { performance } from 'node:perf_hooks';
import { jetstream, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ensureJournalStreams, readJournalCalls } from '@toolgate/bus';
import { createSubjects, type JournalEvent } from '@toolgate/contracts';
import { PolicyReplay, WhatIfTally } from '@toolgate/policy-runtime';
import { callEvents, signedHeaders, testKeys, type CallEventsSpec } from '@toolgate/testing';
import { pool, round, since } from './stats';

export interface WhatIfResult {
  /** Recorded calls replayed per second: stream read, decode, join, chain, tally. */
  whatifCallsPerSec: number;
  whatifCalls: number;
  whatifSeconds: number;
  /** Messages in the journal read from (every event of every call, not only those replayed). */
  whatifJournalEvents: number;
  whatifChanged: number;
}

/** What the recorded calls look like: a mix of tools, verdicts, a hook's decisions, taints. */
const CALLS: Omit<CallEventsSpec, 'dispatchId'>[] = [
  { tool: 'read_file', risk: 'read', input: { path: 'src/index.ts' } },
  { tool: 'shell', risk: 'execute', input: { command: 'npm test -- --watch=false' } },
  { tool: 'shell', risk: 'execute', input: { command: 'git status && git diff --stat' } },
  {
    tool: 'shell',
    risk: 'execute',
    input: { command: 'git push --force origin main' },
    verdict: 'ask',
    decidedBy: 'ask-rule',
    rule: {
      source: 'engine',
      kind: 'rule',
      layer: 'ask',
      index: 0,
      tool: 'shell',
      argv: 'git push **',
    },
  },
  {
    tool: 'http_fetch',
    risk: 'network',
    input: { url: 'https://docs.example/api' },
    taint: 'internal',
  },
  {
    tool: 'write_file',
    risk: 'write',
    input: { path: 'src/feature.ts', content: 'export const answer = 42;\n'.repeat(8) },
  },
  {
    tool: 'http_fetch',
    risk: 'network',
    input: { url: 'http://paste.example/raw' },
    verdict: 'deny',
    decidedBy: 'hook',
    rule: { source: 'engine', kind: 'hook', index: 0, name: 'remote:egress' },
  },
  { tool: 'grep', risk: 'read', input: { pattern: 'TODO', path: 'src' } },
];

/** The candidate: the recorded policy tightened (force pushes denied, writes to src asked). */
const CANDIDATE = {
  engine: {
    deny: [
      { tool: 'shell', argv: ['git push --force **', 'rm -rf **'], reason: 'no force' },
      { risk: 'destructive' },
    ],
    ask: [
      { tool: 'shell', argv: 'git push **' },
      { tool: 'write_file', risk: 'write' },
      { domains: ['*.internal.example'] },
    ],
    expressions: [{ when: 'tool == "http_fetch" && taint == "private"', effect: 'ask' }],
  },
  remote: { engine: { hooks: [{ name: 'egress', unauthenticated: true }] } },
};

/**
 * Policy what-if throughput: `calls` recorded calls (each with all of its events: requested,
 * decided, started and settled, or a deny's settled) published to a journal stream of the bench's
 * own, then one what-if over them timed from the first read to the report — the gateway's path
 * without HTTP: the two filtered consumers, decoding, the join, the pure chain with stand-in hooks,
 * the tally.
 */
export async function benchWhatIf(
  nc: NatsConnection,
  jsm: JetStreamManager,
  prefix: string,
  opts: { quick: boolean },
): Promise<WhatIfResult> {
  const subjects = createSubjects(`${prefix}_wi`);
  await ensureJournalStreams(jsm, subjects);
  try {
    const js = jetstream(nc);
    const calls = opts.quick ? 2_000 : 100_000;
    const encoder = new TextEncoder();
    const events: JournalEvent[] = [];
    let published = 0;
    // Published in chunks (the whole journal at once would hold every event in memory twice).
    for (let start = 0; start < calls; start += 5_000) {
      events.length = 0;
      for (let i = start; i < Math.min(calls, start + 5_000); i++) {
        const spec = CALLS[i % CALLS.length]!;
        events.push(
          ...callEvents({ ...spec, tenant: 'bench', runId: `run-${i % 97}`, dispatchId: `d${i}` })
            .all,
        );
      }
      await pool(events.length, 512, async (i) => {
        const e = events[i]!;
        const subject = subjects.journal.event(e.tenant, e.runId, e.dispatchId, e.type);
        const data = encoder.encode(JSON.stringify(e));
        await js.publish(subject, data, { headers: signedHeaders(subject, data) });
      });
      published += events.length;
    }

    const t0 = performance.now();
    const replay = PolicyReplay.compile(CANDIDATE);
    const tally = new WhatIfTally(1000);
    const reader = readJournalCalls(
      js,
      jsm,
      subjects,
      { tenant: 'bench' },
      { keys: testKeys('gateway') },
    );
    for await (const call of reader) tally.add(call, await replay.replay(call));
    tally.addUndecided(reader.stats.undecided);
    const report = tally.report();
    const seconds = since(t0) / 1000;
    if (report.calls !== calls)
      throw new Error(`what-if replayed ${report.calls} calls of ${calls} recorded`);
    return {
      whatifCallsPerSec: Math.round(report.calls / seconds),
      whatifCalls: report.calls,
      whatifSeconds: round(seconds, 2),
      whatifJournalEvents: published,
      whatifChanged: report.changed,
    };
  } finally {
    await jsm.streams.delete(subjects.journal.stream).catch(() => undefined);
    await jsm.streams.delete(subjects.deadLetter.stream).catch(() => undefined);
  }
}
