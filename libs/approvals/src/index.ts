export { decideResolution, type ResolutionCommand } from './resolution-decider';
export { publishResolution } from './resolution-publisher';
