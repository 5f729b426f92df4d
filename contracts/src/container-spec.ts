import { z } from 'zod';

const domainComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const domain = `${domainComponent}(?:\\.${domainComponent})*(?::[0-9]+)?`;
const pathComponent = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';

/**
 * An OCI image reference (the distribution grammar: `[registry[:port]/]path[:tag][@sha256:…]`).
 * No component can be `.` or `..`, which lets the local backend use it as a relative directory.
 */
export const IMAGE_REFERENCE_PATTERN = new RegExp(
  `^(?:${domain}/)?${pathComponent}(?:/${pathComponent})*(?::[\\w][\\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`,
);

/**
 * Where a `container` tool runs: the image its command runs in, and a CPU quota. The command
 * itself (argv template, env, network hosts, memory and process limits) is the tool's
 * `policy.command`, as for a subprocess tool. Registered as the tool's `policy.container`
 * (published by the gateway's `tools.register`, read by the tool-executor from the registry);
 * like every policy field it is not part of the contract hash.
 */
export const ContainerSpecSchema = z.strictObject({
  /**
   * The image. On one machine (runc) the operator's image directory holds it unpacked under
   * this name (`<images>/<reference>/rootfs`); in Kubernetes the kubelet pulls it. Pin a digest
   * for anything that matters.
   */
  image: z
    .string()
    .max(255)
    .regex(IMAGE_REFERENCE_PATTERN, { message: 'an OCI image reference (registry/path:tag)' }),
  /** CPU quota in cores (0.5 = half a core); lower than the operator's maximum, never higher. */
  cpus: z.number().positive().max(64).optional(),
});
export type ContainerSpec = z.infer<typeof ContainerSpecSchema>;
