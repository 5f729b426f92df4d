// The types of `input-preview.js`, which the gateway generates from the contracts' listing preview
// at start-up (ConsoleController): there is no such file on disk, so the console's type check reads these.
export { cutText, inputPreview } from '../../../contracts/src/list-paging';
