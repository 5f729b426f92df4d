import { PolicyStore } from '@toolgate/registry';
import { useTestNats, type TestNats } from '@toolgate/testing';
import { PolicyRevisions } from './policy-history';

describe('PolicyRevisions against the policy bucket on a real NATS server', () => {
  let t: TestNats;

  beforeAll(async () => {
    t = await useTestNats('policy-rev');
  });
  afterAll(() => t.cleanup());

  it('with no bucket at all, only revision 0 existed', async () => {
    const revisions = new PolicyRevisions(t.nc, t.subjects);
    expect(await revisions.existed('acme', 0, Date.now())).toBe(true);
    expect(await revisions.existed('acme', 3, Date.now())).toBe(false);
  });

  it('knows which revisions a tenant’s policy had, and when', async () => {
    const store = await PolicyStore.open(t.nc, t.subjects);
    try {
      const before = Date.now() - 60_000;
      const r1 = await store.put('acme', { engine: { deny: [{ tool: 'write_file' }] } });
      const other = await store.put('globex', { engine: {} });
      const r2 = await store.put('acme', { engine: {} });
      const after = Date.now() + 60_000;
      const revisions = new PolicyRevisions(t.nc, t.subjects);

      expect(await revisions.existed('acme', r1, after)).toBe(true);
      expect(await revisions.existed('acme', r2, after)).toBe(true);
      // Another tenant's revision, one not written yet, and one before it was written.
      expect(await revisions.existed('acme', other, after)).toBe(false);
      expect(await revisions.existed('acme', r2 + 100, after)).toBe(false);
      expect(await revisions.existed('acme', r2, before)).toBe(false);
      // Revision 0: before acme had a policy yes, after no; a tenant without one, always.
      expect(await revisions.existed('acme', 0, before)).toBe(true);
      expect(await revisions.existed('acme', 0, after)).toBe(false);
      expect(await revisions.existed('initech', 0, after)).toBe(true);
    } finally {
      store.stop();
    }
  });
});
