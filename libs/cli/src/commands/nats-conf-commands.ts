import type { Command } from 'commander';
import { journalPartitionOf, MAX_JOURNAL_PARTITIONS } from '@toolgate/contracts';
import type { CommandContext } from '../run-cli';
import { UsageError } from './cli-input';

const TOKEN = '[A-Za-z0-9_-]+';
const partitionsUsage = (given: string) =>
  new UsageError(
    `--partitions must be an integer from 2 to ${MAX_JOURNAL_PARTITIONS} (1 is the shipped file itself), got ${JSON.stringify(given)}`,
  );
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A NATS configuration's rights widened for a journal of `count` partitions (docs/deploy.md):
 *
 * - every right naming the journal's stream (`<prefix>_journal`: direct and message gets, stream
 *   and consumer info, consumer create, pull and delete, `$JS.ACK`) is kept and granted again on
 *   each partition's stream, `<prefix>_journal_<i>` (a consumer keeps its name on every partition;
 *   the kept right lets the CLI find that the unpartitioned stream does not exist);
 * - each right to publish or follow one event type, `<prefix>.journal.*.*.*.<type>`, becomes
 *   `<prefix>.journal.*.*.*.*.<type>` (the partition token after `journal`), not kept: a subject of
 *   the old shape would land in a partition's stream as a malformed one;
 * - a tenant's follow right, `<prefix>.journal.<tenant>.>`, becomes its partition's,
 *   `<prefix>.journal.<partition>.<tenant>.>`.
 *
 * Everything else is the given text, byte for byte. Throws a {@link UsageError} for a count
 * outside 2–64 or a text that grants nothing on the journal's stream (not a Toolgate
 * configuration for `prefix`).
 */
export function partitionNatsConfig(text: string, count: number, prefix = 'toolgate'): string {
  if (!Number.isInteger(count) || count < 2 || count > MAX_JOURNAL_PARTITIONS)
    throw partitionsUsage(String(count));
  const p = escape(prefix);
  const stream = new RegExp(`(^|\\.)${p}_journal(?=\\.|$)`);
  const ofType = new RegExp(`^${p}\\.journal\\.\\*\\.\\*\\.\\*\\.(${TOKEN})$`);
  const tenantFollow = new RegExp(`^${p}\\.journal\\.(${TOKEN})\\.>$`);
  let streamRights = 0;
  const widened = text.replace(/"([^"\n]*)"/g, (quoted, right: string) => {
    if (stream.test(right)) {
      streamRights++;
      const each = Array.from({ length: count }, (_, i) =>
        JSON.stringify(right.replace(stream, `$1${prefix}_journal_${i}`)),
      );
      return [quoted, ...each].join(', ');
    }
    const type = ofType.exec(right)?.[1];
    if (type) return JSON.stringify(`${prefix}.journal.*.*.*.*.${type}`);
    const tenant = tenantFollow.exec(right)?.[1];
    if (tenant)
      return JSON.stringify(`${prefix}.journal.${journalPartitionOf(tenant, count)}.${tenant}.>`);
    return quoted;
  });
  if (streamRights === 0)
    throw new UsageError(
      `the configuration grants nothing on the journal's stream ${prefix}_journal: not a Toolgate NATS configuration for the prefix ${prefix}`,
    );
  return widened;
}

/**
 * `toolgate nats-conf partition <file> --partitions <n> [--prefix p]`: prints the NATS
 * configuration `<file>` (deploy/nats/nats.conf) with its rights widened for a journal of `n`
 * partitions (see {@link partitionNatsConfig}). Offline.
 */
export function registerNatsConfCommands(program: Command, ctx: CommandContext): void {
  const conf = program.command('nats-conf').description('the NATS server configuration');
  conf
    .command('partition <file>')
    .description(
      "print the configuration <file> with its users' rights widened for a partitioned journal",
    )
    .requiredOption('--partitions <n>', 'the journal partitions (TOOLGATE_JOURNAL_PARTITIONS)')
    .option('--prefix <prefix>', 'the subject prefix the configuration names', 'toolgate')
    .action(async (file: string, opts: { partitions: string; prefix: string }) => {
      if (!/^\d+$/.test(opts.partitions.trim())) throw partitionsUsage(opts.partitions);
      const count = Number(opts.partitions);
      const text = await ctx.readFile(file);
      ctx.out(partitionNatsConfig(text, count, opts.prefix));
    });
}
