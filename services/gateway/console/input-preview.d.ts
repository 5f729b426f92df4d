// The types of `input-preview.js`, which the gateway generates from the contracts' listing preview
// at start-up (ConsoleController): there is no such file on disk, so the console's type check reads these.
// eslint-disable-next-line @nx/enforce-module-boundaries -- types only, of a module the gateway generates from this source
export { cutText, inputPreview } from '../../../contracts/src/list-paging';
