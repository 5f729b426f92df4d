import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createSubjects, journalPartitionOf } from '@toolgate/contracts';
import { ExitCode } from '../run-cli';
import { runCaptured as run } from '../../test/run-captured';
import { partitionNatsConfig } from './nats-conf-commands';

const shippedFile = path.resolve(__dirname, '../../../../deploy/nats/nats.conf');
const shipped = readFileSync(shippedFile, 'utf8');
/** Every quoted string of a configuration: the rights it grants, and its other settings. */
const quoted = (text: string) => [...text.matchAll(/"([^"\n]*)"/g)].map((m) => m[1]!);

describe('toolgate nats-conf partition', () => {
  const widened = partitionNatsConfig(shipped, 4);

  it("grants every right on the journal's stream again on each partition's stream, and keeps it", () => {
    const onStream = quoted(shipped).filter((r) => /(^|\.)toolgate_journal(\.|$)/.test(r));
    expect(onStream.length).toBeGreaterThan(20);
    const rights = quoted(widened);
    for (const right of onStream) {
      expect(rights).toContain(right);
      for (const i of [0, 1, 2, 3])
        expect(rights).toContain(right.replace(/toolgate_journal/, `toolgate_journal_${i}`));
    }
    // The projection's consumer keeps its name (toolgate_journal) on every partition's stream.
    expect(rights).toContain('$JS.ACK.toolgate_journal_2.toolgate_journal.>');
    expect(rights).toContain('$JS.API.CONSUMER.CREATE.toolgate_journal_3.toolgate_journal.>');
  });

  it('turns each event-type right into the partitioned subject shape, and a tenant’s follow into its partition’s', () => {
    const subjects = createSubjects('toolgate', { journalPartitions: 4 });
    const rights = quoted(widened);
    expect(rights.filter((r) => /^toolgate\.journal\.\*\.\*\.\*\.[a-z-]+$/.test(r))).toEqual([]);
    expect(rights).toContain(subjects.journal.ofType('requested'));
    expect(rights).toContain(subjects.journal.ofType('worktree-acquired'));
    expect(rights).not.toContain('toolgate.journal.acme.>');
    expect(rights).toContain(subjects.journal.forTenant('acme'));
    expect(subjects.journal.forTenant('acme')).toBe(
      `toolgate.journal.${journalPartitionOf('acme', 4)}.acme.>`,
    );
  });

  it('leaves everything else as it was, byte for byte', () => {
    const strip = (text: string) =>
      text.replace(/"([^"\n]*journal[^"\n]*)"(, "[^"\n]*journal[^"\n]*")*/g, '"J"');
    expect(strip(widened)).toBe(strip(shipped));
  });

  it('prints the widened file, and refuses a bad count or a file that is not a Toolgate configuration', async () => {
    const ok = await run(['nats-conf', 'partition', shippedFile, '--partitions', '4']);
    expect(ok).toMatchObject({ code: ExitCode.Ok, stdout: widened });
    for (const bad of ['1', '65', 'four', '2.5']) {
      const refused = await run(['nats-conf', 'partition', shippedFile, '--partitions', bad]);
      expect(refused.code).toBe(ExitCode.Usage);
      expect(refused.stderr).toContain(`--partitions must be an integer from 2 to 64`);
      expect(refused.stdout).toBe('');
    }
    const other = await run(['nats-conf', 'partition', shippedFile, '--partitions', '4'], {
      readFile: async () => 'port: 4222\n',
    });
    expect(other.code).toBe(ExitCode.Usage);
    expect(other.stderr).toContain('not a Toolgate NATS configuration');
    const missing = await run([
      'nats-conf',
      'partition',
      '/no/such/nats.conf',
      '--partitions',
      '4',
    ]);
    expect(missing.code).toBe(ExitCode.Usage);
    expect(missing.stderr).toContain('cannot read /no/such/nats.conf');
  });
});
