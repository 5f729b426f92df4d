import { runUntilSignalled } from '@toolgate/service-kit';
import { SANDBOX_OFF_WARNING } from '@toolgate/tool-executor';
import { DEV_TOKEN_GRANT, loadAllInOneOptions, startAllInOne } from './all-in-one';

void runUntilSignalled('all-in-one', async () => {
  const options = loadAllInOneOptions(process.env);
  // Warn on what loadAllInOneOptions decided, not on a second reading of the environment.
  if (options.gateway.tokens.includes(DEV_TOKEN_GRANT)) {
    console.warn(
      'toolgate: TOOLGATE_TOKENS is not set; the development token from the README is active (tenant "dev")',
    );
  }
  if (options.executor.sandbox.mode === 'off') console.warn(SANDBOX_OFF_WARNING);
  const all = await startAllInOne(options);
  console.log(
    `toolgate: gateway listening on ${all.gateway.url} (NATS ${options.gateway.natsUrl}, prefix ${options.gateway.prefix})`,
  );
  console.log(
    `toolgate: journal database ${options.journal.databaseUrl ? 'PostgreSQL from DATABASE_URL' : `PGlite at ${options.journal.pglitePath}`}`,
  );
  return all;
});
