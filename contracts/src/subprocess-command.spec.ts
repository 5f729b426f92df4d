import { SubprocessCommandSchema } from './subprocess-command';
import { ToolPolicySchema } from './tool-contract';

const issues = (value: unknown) =>
  SubprocessCommandSchema.safeParse(value).error?.issues.map((i) => i.path.join('.')) ?? [];

describe('SubprocessCommandSchema', () => {
  it('takes literal argv elements and input placeholders', () => {
    const command = {
      argv: ['/usr/bin/jq', '-c', '--arg', 'who', { input: 'name' }, '.'],
      env: { LANG: 'C.UTF-8' },
      network: { hosts: ['api.example.com'] },
      limits: { cpuSeconds: 5, memoryMb: 256, processes: 8 },
    };
    expect(SubprocessCommandSchema.parse(command)).toEqual(command);
    expect(ToolPolicySchema.parse({ executor: 'subprocess', command }).command).toEqual(command);
  });

  it('refuses a placeholder as the program, and an empty argv', () => {
    expect(issues({ argv: [{ input: 'program' }, 'x'] })).toEqual(['argv']);
    expect(issues({ argv: [] })).toContain('argv');
    expect(issues({ argv: [''] })).toEqual(['argv']);
  });

  it('refuses NUL bytes, bad field and variable names, unknown keys', () => {
    expect(issues({ argv: ['echo', 'a\0b'] })).toEqual(['argv.1']);
    expect(issues({ argv: ['echo', { input: 'a.b' }] })).toEqual(['argv.1.input']);
    expect(issues({ argv: ['echo'], env: { 'BAD-NAME': 'x' } })).toEqual(['env.BAD-NAME']);
    expect(issues({ argv: ['echo'], shell: true })).toEqual(['']);
    expect(issues(JSON.parse('{"argv":["echo"],"env":{"__proto__":"x"}}'))).toEqual([
      'env.__proto__',
    ]);
  });

  it('takes exact host names only: no wildcard, no port, no scheme', () => {
    for (const host of ['*.example.com', 'example.com:443', 'https://example.com', 'EXAMPLE.com']) {
      expect(issues({ argv: ['curl'], network: { hosts: [host] } })).toEqual(['network.hosts.0']);
    }
  });
});
