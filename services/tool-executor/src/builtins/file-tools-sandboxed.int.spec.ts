import { Sandbox } from '@toolgate/sandbox';
import { fileToolCases } from '../../test/file-tools-cases';
import { FileScopePool } from './file-scope/file-scope-pool';

// In the scope sandbox (the default): the same cases, the same answers.
let files: FileScopePool;

beforeAll(async () => {
  files = new FileScopePool(await Sandbox.open());
});

afterAll(async () => {
  await files.close();
});

fileToolCases(() => files);
