import fc from 'fast-check';
import { configError } from '../test/support/config-error';
import {
  ApiOperation,
  type ApprovalNotification,
  assertSubjectToken,
  ConsumerRole,
  createSubjects,
  eventTypeOfSubject,
  isSubjectToken,
  QueryOperation,
  type Subjects,
  WorktreeOperation,
  JournalOperation,
} from './subjects';
import { subjectMatches as matches } from '../test/support/subject-match';

const hostile: unknown[] = [
  'a.b',
  '*',
  '>',
  ' ',
  'a b',
  '',
  '\t',
  'a\tb',
  '\n',
  'a\n',
  'a\r\nb',
  '.',
  'a.',
  '.a',
  'a*',
  'a>',
  'é',
  'a/b',
  'x'.repeat(129),
  '\u0000',
  null,
  undefined,
  42,
  {},
  ['a'],
];

const s = createSubjects('tg');
const token = fc.stringMatching(/^[A-Za-z0-9_-]{1,128}$/);

describe('subject tokens', () => {
  it.each(hostile.map((h) => [JSON.stringify(h) ?? String(h), h]))(
    'refuses the hostile token %s',
    (_label, value) => {
      expect(isSubjectToken(value)).toBe(false);
      const err = configError(() => assertSubjectToken('tenant', value));
      expect(err.details).toEqual({ field: 'tenant' });
    },
  );

  it('accepts 1 to 128 characters of [A-Za-z0-9_-]', () => {
    for (const ok of ['a', 'x'.repeat(128), 'Tenant_1-a', 'd0123abc']) {
      expect(isSubjectToken(ok)).toBe(true);
      expect(() => assertSubjectToken('tenant', ok)).not.toThrow();
    }
  });
});

describe('createSubjects', () => {
  it.each([...hostile, 'x'.repeat(33)].map((h) => [JSON.stringify(h) ?? String(h), h]))(
    'refuses the prefix %s',
    (_label, prefix) => {
      configError(() => createSubjects(prefix as string));
    },
  );

  it('accepts a prefix of up to 32 token characters', () => {
    expect(createSubjects('x'.repeat(32)).prefix).toBe('x'.repeat(32));
    expect(createSubjects('toolgate').prefix).toBe('toolgate');
  });

  it('names streams, consumers and buckets after the prefix', () => {
    expect(s.prefix).toBe('tg');
    expect(s.journal.stream).toBe('tg_journal');
    expect(s.journal.all).toBe('tg.journal.>');
    expect(s.deadLetter.stream).toBe('tg_deadletter');
    expect(s.deadLetter.all).toBe('tg.deadletter.>');
    expect(s.consumer(ConsumerRole.Evaluator)).toBe('tg_evaluator');
    expect(s.toolsBucket).toBe('tg_tools');
    expect(s.policyBucket).toBe('tg_policy');
    expect(s.artifactsBucket).toBe('tg_artifacts');
    expect(s.mcpStateBucket).toBe('tg_mcp_state');
    expect(s.cancelDispatch).toBe('tg.executor.cancel');
    expect(s.mcpListTools).toBe('tg.executor.mcp.list');
  });

  it('builds the journal grammar <prefix>.journal.<tenant>.<runId>.<key>.<event>', () => {
    expect(s.journal.event('acme', 'run1', 'd42', 'requested')).toBe(
      'tg.journal.acme.run1.d42.requested',
    );
    expect(s.journal.forKey('acme', 'run1', 'd42')).toBe('tg.journal.acme.run1.d42.*');
    expect(s.journal.forRun('acme', 'run1')).toBe('tg.journal.acme.run1.>');
    expect(s.journal.ofType('settled')).toBe('tg.journal.*.*.*.settled');
    expect(s.journal.forTenant('acme')).toBe('tg.journal.acme.>');
    expect(s.journal.ofTypeIn('decided', 'acme', 'run1')).toBe('tg.journal.acme.run1.*.decided');
    expect(s.journal.ofTypeIn('decided', 'acme', '*')).toBe('tg.journal.acme.*.*.decided');
    expect(s.journal.matching('acme', 'run1')).toBe('tg.journal.acme.run1.>');
    expect(s.journal.matching('*', 'run1')).toBe('tg.journal.*.run1.>');
    expect(s.journal.matching('*', '*')).toBe('tg.journal.*.*.>');
  });

  it('reads the dispatch (or worktree) a journal subject names, with its tenant', () => {
    const of = (tenant: string, run: string, key: string, type: string) =>
      s.journal.keyOf(s.journal.event(tenant, run, key, type));
    expect(of('acme', 'run1', 'd42', 'requested')).toBe('acme.d42');
    // Every event of one dispatch shares its key, whatever its type; other keys and tenants differ.
    expect(of('acme', 'run1', 'd42', 'settled')).toBe(of('acme', 'run1', 'd42', 'decided'));
    expect(of('acme', 'run1', 'd43', 'settled')).not.toBe(of('acme', 'run1', 'd42', 'settled'));
    expect(of('globex', 'run1', 'd42', 'settled')).not.toBe(of('acme', 'run1', 'd42', 'settled'));
    expect(s.journal.keyOf('tg.deadletter.executor')).toBe('tg.deadletter.executor');
  });

  it('reads the event type a journal subject names', () => {
    expect(eventTypeOfSubject(s.journal.event('acme', 'run1', 'd42', 'decided'))).toBe('decided');
    expect(eventTypeOfSubject(s.journal.event('acme', 'run1', 'w1', 'worktree-acquired'))).toBe(
      'worktree-acquired',
    );
  });

  it('builds the other subjects', () => {
    expect(s.deadLetter.forRole(ConsumerRole.Executor)).toBe('tg.deadletter.executor');
    expect(s.api(ApiOperation.SubmitDispatch)).toBe('tg.api.dispatch.submit');
    expect(s.query(QueryOperation.GetApproval)).toBe('tg.query.approvals.get');
    expect(s.approvals('acme', 'pending')).toBe('tg.approvals.acme.pending');
    expect(s.approvals('acme', '*')).toBe('tg.approvals.acme.*');
    expect(s.hook('acme', 'audit-hook')).toBe('tg.hooks.acme.audit-hook');
    expect(s.remoteTool('acme', 'search_issues')).toEqual({
      subject: 'tg.tools.acme.search_issues',
      queue: 'tg.tools.acme.search_issues',
    });
    expect(s.worktree(WorktreeOperation.Acquire)).toBe('tg.worktree.acquire');
    expect(s.ops(JournalOperation.Rebuild)).toBe('tg.ops.journal.rebuild');
  });

  it('reads the operation an API subject names, and only a whole known one', () => {
    for (const op of Object.values(ApiOperation)) {
      expect(matches(s.apiAll, s.api(op))).toBe(true);
      expect(s.apiOperationOf(s.api(op))).toBe(op);
    }
    for (const subject of [
      'tg.api.dispatch.sumbit',
      'tg.api.dispatch',
      'tg.api.dispatch.submit.x',
      'other.api.dispatch.submit',
      'tg.query.run.get',
      'tg.api.',
    ])
      expect([subject, s.apiOperationOf(subject)]).toEqual([subject, undefined]);
  });

  it('names every consumer and dead-letter subject for every role, and every API subject', () => {
    for (const role of Object.values(ConsumerRole)) {
      expect(isSubjectToken(s.consumer(role))).toBe(true);
      expect(matches(s.deadLetter.all, s.deadLetter.forRole(role))).toBe(true);
    }
    const api = Object.values(ApiOperation).map((op) => s.api(op));
    const query = Object.values(QueryOperation).map((op) => s.query(op));
    expect(new Set(api).size).toBe(api.length);
    expect(new Set(query).size).toBe(query.length);
    for (const subject of [...api, ...query]) {
      expect(subject.split('.').every((t) => isSubjectToken(t))).toBe(true);
      expect(matches(s.journal.all, subject)).toBe(false);
    }
  });

  /** Every builder, called with one hostile argument in each token position. */
  const builders: [string, (subjects: Subjects, bad: never) => unknown][] = [
    ['journal.event tenant', (x, b) => x.journal.event(b, 'r', 'k', 'requested')],
    ['journal.event runId', (x, b) => x.journal.event('t', b, 'k', 'requested')],
    ['journal.event key', (x, b) => x.journal.event('t', 'r', b, 'requested')],
    ['journal.event type', (x, b) => x.journal.event('t', 'r', 'k', b)],
    ['journal.forKey tenant', (x, b) => x.journal.forKey(b, 'r', 'k')],
    ['journal.forKey runId', (x, b) => x.journal.forKey('t', b, 'k')],
    ['journal.forKey key', (x, b) => x.journal.forKey('t', 'r', b)],
    ['journal.forRun tenant', (x, b) => x.journal.forRun(b, 'r')],
    ['journal.forRun runId', (x, b) => x.journal.forRun('t', b)],
    ['journal.ofType', (x, b) => x.journal.ofType(b)],
    ['journal.forTenant', (x, b) => x.journal.forTenant(b)],
    ['journal.ofTypeIn type', (x, b) => x.journal.ofTypeIn(b, 't', 'r')],
    ['journal.ofTypeIn tenant', (x, b) => x.journal.ofTypeIn('requested', b, 'r')],
    ['journal.ofTypeIn runId', (x, b) => x.journal.ofTypeIn('requested', 't', b)],
    ['journal.matching tenant', (x, b) => x.journal.matching(b, 'r')],
    ['journal.matching runId', (x, b) => x.journal.matching('t', b)],
    ['deadLetter.forRole', (x, b) => x.deadLetter.forRole(b)],
    ['consumer', (x, b) => x.consumer(b)],
    ['api', (x, b) => x.api(b)],
    ['query', (x, b) => x.query(b)],
    ['approvals tenant', (x, b) => x.approvals(b, 'pending')],
    ['approvals event', (x, b) => x.approvals('t', b)],
    ['hook tenant', (x, b) => x.hook(b, 'h')],
    ['hook name', (x, b) => x.hook('t', b)],
    ['remoteTool tenant', (x, b) => x.remoteTool(b, 'tool')],
    ['remoteTool toolName', (x, b) => x.remoteTool('t', b)],
    ['worktree', (x, b) => x.worktree(b)],
  ];

  it.each(builders)('%s refuses every hostile token', (_name, build) => {
    for (const bad of hostile) {
      // The documented wildcards.
      if (
        bad === '*' &&
        (_name === 'approvals event' ||
          _name.startsWith('journal.ofTypeIn runId') ||
          _name.startsWith('journal.matching'))
      )
        continue;
      configError(() => build(s, bad as never));
    }
  });

  it('refuses operations it does not know, even when they look like tokens', () => {
    configError(() => s.api('tools' as ApiOperation));
    configError(() => s.api('tools.delete' as ApiOperation));
    configError(() => s.query('dispatch.submit' as QueryOperation));
    configError(() => s.worktree('steal' as WorktreeOperation));
    configError(() => s.ops('drop' as JournalOperation));
    configError(() => s.consumer('gateway' as ConsumerRole));
    configError(() => s.approvals('acme', 'expired' as ApprovalNotification));
  });

  it('every event subject is matched by the filters that should see it, and only those', () => {
    fc.assert(
      fc.property(
        fc.tuple(token, token, token, token),
        fc.tuple(token, token, token, token),
        ([tenant, run, key, type], [t2, r2, k2, e2]) => {
          const subject = s.journal.event(tenant, run, key, type);
          expect(subject.split('.')).toHaveLength(6);
          expect(matches(s.journal.all, subject)).toBe(true);
          expect(matches(s.journal.forTenant(tenant), subject)).toBe(true);
          expect(matches(s.journal.forRun(tenant, run), subject)).toBe(true);
          expect(matches(s.journal.forKey(tenant, run, key), subject)).toBe(true);
          expect(matches(s.journal.ofType(type), subject)).toBe(true);
          expect(matches(s.journal.ofTypeIn(type, tenant, run), subject)).toBe(true);
          expect(matches(s.journal.ofTypeIn(type, tenant, '*'), subject)).toBe(true);
          if (t2 !== tenant)
            expect(matches(s.journal.ofTypeIn(type, t2, '*'), subject)).toBe(false);
          if (t2 !== tenant) expect(matches(s.journal.forTenant(t2), subject)).toBe(false);
          if (r2 !== run) expect(matches(s.journal.forRun(tenant, r2), subject)).toBe(false);
          if (k2 !== key) expect(matches(s.journal.forKey(tenant, run, k2), subject)).toBe(false);
          if (e2 !== type) expect(matches(s.journal.ofType(e2), subject)).toBe(false);
          expect(matches(createSubjects('other').journal.all, subject)).toBe(false);
        },
      ),
    );
  });

  it('keeps prefixes apart: one prefix never sees another one’s journal', () => {
    const a = createSubjects('a');
    const ab = createSubjects('a_b');
    expect(matches(a.journal.all, ab.journal.event('t', 'r', 'k', 'requested'))).toBe(false);
    expect(matches(ab.journal.all, a.journal.event('t', 'r', 'k', 'requested'))).toBe(false);
    expect(a.journal.stream).not.toBe(ab.journal.stream);
  });

  it('is frozen', () => {
    expect(Object.isFrozen(s)).toBe(true);
    expect(Object.isFrozen(s.journal)).toBe(true);
    expect(Object.isFrozen(s.deadLetter)).toBe(true);
  });
});
