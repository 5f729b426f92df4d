import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { eventually, useTestNats, type TestNats } from '@toolgate/testing';
import { PolicyStore } from './policy-store';

describe('PolicyStore on a real KV bucket', () => {
  let t: TestNats;
  let store: PolicyStore;

  beforeAll(async () => {
    t = await useTestNats('policy');
    store = await PolicyStore.open(t.nc, t.subjects);
  });
  afterAll(async () => {
    store?.stop();
    await t?.cleanup();
  });

  it('reports revision 0 and an empty document when nothing is stored', () => {
    expect(store.get('nobody')).toEqual({ revision: 0, document: {} });
  });

  it('reads back what it put, at the revision it was written at', async () => {
    const revision = await store.put('acme', { rules: { deny: ['Bash(rm:*)'] } });
    expect(revision).toBeGreaterThan(0);
    expect(store.get('acme')).toEqual({ revision, document: { rules: { deny: ['Bash(rm:*)'] } } });
  });

  it('with expectedRevision 0 creates, and refuses when a policy already exists', async () => {
    const first = await store.put('initech', { v: 1 }, 0);
    expect(store.get('initech').revision).toBe(first);
    let err: unknown;
    await store.put('initech', { v: 2 }, 0).catch((e: unknown) => (err = e));
    expect(err).toBeInstanceOf(ToolgateError);
    expect((err as ToolgateError).code).toBe(ErrorCode.Conflict);
    expect((err as ToolgateError).details).toEqual({ expectedRevision: 0, currentRevision: first });
    expect(store.get('initech').document).toEqual({ v: 1 });
  });

  it('with a stale expectedRevision fails with conflict and keeps the current document', async () => {
    const r1 = await store.put('globex', { v: 1 });
    const r2 = await store.put('globex', { v: 2 }, r1);
    expect(r2).toBeGreaterThan(r1);
    let err: unknown;
    await store.put('globex', { v: 3 }, r1).catch((e: unknown) => (err = e));
    expect((err as ToolgateError).code).toBe(ErrorCode.Conflict);
    expect((err as ToolgateError).details).toEqual({ expectedRevision: r1, currentRevision: r2 });
    expect(store.get('globex')).toEqual({ revision: r2, document: { v: 2 } });
  });

  it('refuses a tenant that is not a subject token', async () => {
    let err: unknown;
    await store.put('acme.evil', { v: 1 }).catch((e: unknown) => (err = e));
    expect((err as ToolgateError).code).toBe(ErrorCode.Config);
  });

  it('a second PolicyStore on the same bucket sees a put (hot reload)', async () => {
    const reader = await PolicyStore.open(t.nc, t.subjects);
    try {
      expect(reader.get('acme').document).toEqual({ rules: { deny: ['Bash(rm:*)'] } });
      const revision = await store.put('acme', { rules: { deny: [] } });
      const seen = await eventually(
        () => (reader.get('acme').revision === revision ? reader.get('acme') : undefined),
        {
          what: 'the reader to see the new revision',
        },
      );
      expect(seen.document).toEqual({ rules: { deny: [] } });
    } finally {
      reader.stop();
    }
  });
});
