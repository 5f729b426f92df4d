import { ContainerSpecSchema, IMAGE_REFERENCE_PATTERN } from './container-spec';
import { contractHash } from './contract-hash';
import { ToolPolicySchema } from './tool-contract';

describe('ContainerSpecSchema', () => {
  it('takes image references as registries write them', () => {
    for (const image of [
      'busybox',
      'tools/jq:1.7',
      'registry.example.com:5000/team/jq_tool:v1.7.1-rc.2',
      `ghcr.io/acme/lint@sha256:${'a'.repeat(64)}`,
      `ghcr.io/acme/lint:2@sha256:${'0'.repeat(64)}`,
      'localhost/a__b/c-d/e.f',
    ]) {
      expect([image, IMAGE_REFERENCE_PATTERN.test(image)]).toEqual([image, true]);
    }
  });

  it('refuses what is not a reference — and anything that would be a path', () => {
    for (const image of [
      '',
      '/abs/rootfs',
      '../etc',
      'a/../b',
      'a/./b',
      'tools//jq',
      'tools/',
      '.hidden',
      'Tools/JQ',
      'jq:',
      'jq@sha256:abc',
      'jq:tag with space',
      'a/b\0',
    ]) {
      expect([image, ContainerSpecSchema.safeParse({ image }).success]).toEqual([image, false]);
    }
  });

  it('is a policy field, outside the contract hash', () => {
    const contract = { name: 'lint', description: 'Lints.', parameters: { type: 'object' } };
    const policy = ToolPolicySchema.parse({
      executor: 'container',
      command: { argv: ['/usr/bin/lint'] },
      container: { image: 'tools/lint:1', cpus: 0.5 },
    });
    expect(policy.container).toEqual({ image: 'tools/lint:1', cpus: 0.5 });
    expect(contractHash({ ...contract, policy } as never)).toBe(contractHash(contract));
    expect(ToolPolicySchema.safeParse({ container: { image: 'x', mounts: ['/'] } }).success).toBe(
      false,
    );
  });
});
