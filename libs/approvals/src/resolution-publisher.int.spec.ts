import { SpanKind } from '@opentelemetry/api';
import { hrTimeToMilliseconds } from '@opentelemetry/core';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Subscription } from '@nats-io/transport-node';
import { ensureJournalStreams, JournalPublisher } from '@toolgate/bus';
import {
  ErrorCode,
  parseJournalEvent,
  ToolgateError,
  type ResolvedEvent,
} from '@toolgate/contracts';
import { inSpan, setupTelemetry, type Telemetry } from '@toolgate/telemetry';
import {
  eventually,
  reForger,
  useTestNats,
  type TestNats,
  testJournalKeys,
} from '@toolgate/testing';
import { APPROVAL_KEY, suspendedEvent } from '../test/fixtures/suspended-event.fixture';
import { decideResolution } from './resolution-decider';
import { publishResolution } from './resolution-publisher';

function resolution(
  dispatchId: string,
  decision: string,
  by: string,
  attemptId: string,
): ResolvedEvent {
  return decideResolution(suspendedEvent({ dispatchId }), {
    decision,
    by,
    source: 'human',
    approvalKey: APPROVAL_KEY,
    at: new Date('2026-03-01T10:00:00.000Z'),
    attemptId,
  });
}

/** A parked call as a resolver holds it when nothing was read back: no headers, no trace. */
const parked = (dispatchId: string) => ({
  event: suspendedEvent({ dispatchId }),
  headers: undefined,
});

describe('publishResolution on a real JetStream stream', () => {
  const spans = new InMemorySpanExporter();
  let telemetry: Telemetry;
  let t: TestNats;
  let publisher: JournalPublisher;
  let announcements: Subscription;
  const announced: ResolvedEvent[] = [];

  beforeAll(async () => {
    telemetry = setupTelemetry({ serviceName: 'approvals-spec', exporter: spans, simple: true });
    t = await useTestNats('approvals');
    await ensureJournalStreams(t.jsm, t.subjects);
    publisher = new JournalPublisher(t.nc, t.subjects, testJournalKeys());
    announcements = t.nc.subscribe(t.subjects.approvals('acme', 'resolved'), {
      callback: (_err, msg) => {
        announced.push(msg.json<ResolvedEvent>());
      },
    });
    await t.nc.flush();
  });
  afterAll(async () => {
    announcements?.unsubscribe();
    await t?.cleanup();
    await telemetry.shutdown();
  });

  it('the first resolution wins and is announced; the second gets already-resolved naming the winner', async () => {
    const first = resolution('d1', 'allow', 'user:bob', 'attempt-1');
    expect(await publishResolution(publisher, t.nc, t.subjects, first, parked('d1'))).toEqual(
      first,
    );

    const second = resolution('d1', 'deny', 'user:carol', 'attempt-2');
    const err = await publishResolution(publisher, t.nc, t.subjects, second, parked('d1')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ToolgateError);
    expect((err as ToolgateError).code).toBe(ErrorCode.AlreadyResolved);
    expect((err as ToolgateError).message).toBe('already resolved: allow');
    expect((err as ToolgateError).details).toEqual({
      decision: 'allow',
      by: 'user:bob',
      source: 'human',
      at: first.at,
      dispatchId: 'd1',
    });

    // The journal holds the winner only.
    const stored = await publisher.last('acme', 'run1', 'd1', 'resolved');
    expect(parseJournalEvent(stored?.event)).toEqual(first);

    // The winner, and only the winner, is announced on the tenant's approvals subject.
    await eventually(() => (announced.some((e) => e.dispatchId === 'd1') ? true : undefined), {
      what: 'the resolved announcement',
    });
    await t.nc.flush();
    expect(announced.filter((e) => e.dispatchId === 'd1')).toEqual([first]);
  });

  it('of racing resolutions exactly one wins and every loser names it', async () => {
    const attempts = Array.from({ length: 8 }, (_, i) =>
      resolution('d2', i % 2 ? 'allow' : 'deny', `user:r${i}`, `race-${i}`),
    );
    const results = await Promise.allSettled(
      attempts.map((r) => publishResolution(publisher, t.nc, t.subjects, r, parked('d2'))),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    const winner = (won[0] as PromiseFulfilledResult<ResolvedEvent>).value;
    for (const lost of results.filter((r) => r.status === 'rejected')) {
      const reason = (lost as PromiseRejectedResult).reason as ToolgateError;
      expect(reason.code).toBe(ErrorCode.AlreadyResolved);
      expect(reason.details).toMatchObject({ decision: winner.decision, by: winner.by });
    }
  });

  it("resumes the parked call's trace: an approval wait from the suspension, linked to the resolver", async () => {
    spans.reset();
    // The evaluator parks the call inside the dispatch's trace; its headers carry that trace.
    const event = suspendedEvent({
      dispatchId: 'd3',
      at: new Date(Date.now() - 5000).toISOString(),
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    });
    await inSpan('dispatch', {}, () => publisher.append(event));
    const stored = await publisher.last('acme', 'run1', 'd3', 'suspended');
    expect(stored).not.toBeNull();

    // An approver's request, in a trace of its own, resolves it.
    const resolved = decideResolution(event, {
      decision: 'allow',
      by: 'user:bob',
      source: 'human',
      approvalKey: APPROVAL_KEY,
      at: new Date(),
      attemptId: 'attempt-3',
    });
    await inSpan('approver request', { kind: SpanKind.SERVER }, () =>
      publishResolution(publisher, t.nc, t.subjects, resolved, stored!),
    );

    const finished = spans.getFinishedSpans();
    const one = (name: string) => {
      const found = finished.filter((s) => s.name === name);
      expect(found).toHaveLength(1);
      return found[0]!;
    };
    const sendSuspended = one(
      `send ${t.subjects.journal.event('acme', 'run1', 'd3', 'suspended')}`,
    );
    const sendResolved = one(`send ${t.subjects.journal.event('acme', 'run1', 'd3', 'resolved')}`);
    const wait = one('approval wait');
    const approver = one('approver request');

    const dispatchTrace = sendSuspended.spanContext().traceId;
    expect(approver.spanContext().traceId).not.toBe(dispatchTrace);
    expect(wait.spanContext().traceId).toBe(dispatchTrace);
    expect(wait.parentSpanContext?.spanId).toBe(sendSuspended.spanContext().spanId);
    expect(wait.links.map((l) => l.context.spanId)).toEqual([approver.spanContext().spanId]);
    // It covers the wait: from the suspension's time to after the resolution was published.
    expect(hrTimeToMilliseconds(wait.startTime)).toBe(Date.parse(event.at));
    expect(sendResolved.parentSpanContext?.spanId).toBe(wait.spanContext().spanId);
    expect(wait.attributes).toMatchObject({
      'toolgate.dispatch_id': 'd3',
      'toolgate.tool': 'delete_branch',
      'toolgate.approval.decision': 'allow',
      'toolgate.approval.source': 'human',
    });
    // Consumers of `resolved` continue the dispatch's trace from its headers.
    const resolvedStored = await publisher.last('acme', 'run1', 'd3', 'resolved');
    expect(resolvedStored?.headers?.get('traceparent')).toContain(dispatchTrace);
  });

  it('a resolution that forgeries keep out answers unavailable (retryable), not already-resolved; a retry wins', async () => {
    // The resolver behind a slow link, against a client that re-forges the call's `resolved`.
    const forger = await reForger(t, t.subjects.journal.event('acme', 'run1', 'd4', 'resolved'));
    try {
      const slowNc = await forger.victim();
      const slow = new JournalPublisher(slowNc, t.subjects, testJournalKeys());
      const attempt = resolution('d4', 'allow', 'user:bob', 'attempt-1');
      const err = await publishResolution(slow, slowNc, t.subjects, attempt, parked('d4')).then(
        () => undefined,
        (e: unknown) => e,
      );
      forger.stop();
      expect(err).toBeInstanceOf(ToolgateError);
      expect((err as ToolgateError).code).toBe(ErrorCode.Unavailable);
      expect((err as ToolgateError).details).toMatchObject({ retryable: true, dispatchId: 'd4' });
      expect(await publisher.last('acme', 'run1', 'd4', 'resolved')).toBeNull();
      // The attacker gone, the approver's retry is recorded and announced.
      const retry = resolution('d4', 'allow', 'user:bob', 'attempt-2');
      expect(await publishResolution(slow, slowNc, t.subjects, retry, parked('d4'))).toEqual(retry);
      expect(
        parseJournalEvent((await publisher.last('acme', 'run1', 'd4', 'resolved'))?.event),
      ).toEqual(retry);
      await eventually(() => (announced.some((e) => e.dispatchId === 'd4') ? true : undefined), {
        what: 'the resolved announcement',
      });
      expect(announced.filter((e) => e.dispatchId === 'd4')).toEqual([retry]);
    } finally {
      await forger.close();
    }
  });
});
