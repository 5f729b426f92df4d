export { runCli, ExitCode, type CliIo } from './run-cli';
export type { FetchFn } from './http/gateway-http-client';
export { partitionNatsConfig } from './commands/nats-conf-commands';
