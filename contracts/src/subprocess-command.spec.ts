import { declaredHost, SubprocessCommandSchema } from './subprocess-command';
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

  it('takes exact host names only, each with a port or without: no wildcard, no scheme', () => {
    for (const host of [
      '*.example.com',
      'https://example.com',
      'EXAMPLE.com',
      'example.com:0',
      'example.com:65536',
      'example.com:0443',
      'example.com:',
      'example.com:443:1',
      ':443',
      '443:443',
    ]) {
      expect(issues({ argv: ['curl'], network: { hosts: [host] } })).toEqual(['network.hosts.0']);
    }
    expect(
      issues({ argv: ['curl'], network: { hosts: ['example.com', 'api.example.com:443'] } }),
    ).toEqual([]);
    expect(['api.example.com:443', 'localhost', 'a1:65535'].map(declaredHost)).toEqual([
      { host: 'api.example.com', port: 443 },
      { host: 'localhost' },
      { host: 'a1', port: 65_535 },
    ]);
  });
});
