// The types of `trace-link.js`, which the gateway generates from the contracts' trace links at
// start-up (ConsoleController): there is no such file on disk, so the console's type check reads these.
export { traceLink } from '../../../contracts/src/trace-link';
