import { runUntilSignalled } from '@toolgate/service-kit';
import { loadAllInOneOptions, startAllInOne } from './all-in-one';

void runUntilSignalled('all-in-one', async () => {
  const options = loadAllInOneOptions(process.env);
  if (!process.env.TOOLGATE_TOKENS && !process.env.TOOLGATE_TOKENS_FILE) {
    console.warn(
      'toolgate: TOOLGATE_TOKENS is not set; the development token from the README is active (tenant "dev")',
    );
  }
  const all = await startAllInOne(options);
  console.log(
    `toolgate: gateway listening on ${all.gateway.url} (NATS ${options.gateway.natsUrl}, prefix ${options.gateway.prefix})`,
  );
  console.log(
    `toolgate: journal database ${options.journal.databaseUrl ? 'PostgreSQL from DATABASE_URL' : `PGlite at ${options.journal.pglitePath}`}`,
  );
  return all;
});
