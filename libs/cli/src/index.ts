export { runCli, ExitCode, type CliIo, type CommandContext } from './run-cli';
export { UsageError } from './commands/cli-input';
export { GatewayHttpClient, type FetchFn } from './http/gateway-http-client';
