import { fileToolCases } from '../../test/file-tools-cases';

// In process: the path checks alone (EXECUTOR_SANDBOX=off).
fileToolCases(() => null);
