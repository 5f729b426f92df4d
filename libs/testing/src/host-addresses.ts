import os from 'node:os';

/**
 * This host's own non-loopback IPv4 addresses: where a service listening on every address is
 * reached without loopback, which a network boundary must cut off too.
 */
export function hostAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && a.family === 'IPv4' && !a.internal)
    .map((a) => a!.address);
}
