// The types of `visible-text.js`, which the gateway generates from the contracts' rules at start-up
// (ConsoleController): there is no such file on disk, so the console's type check reads these.
export { codePointLabel, hiddenFindings, revealPieces } from '../../../contracts/src/visible-text';
