import { BlockList, isIP } from 'node:net';
import os from 'node:os';
import { canonicalHost } from '@toolgate/permissions';

/**
 * Address blocks that lead to this machine or to the networks around it rather than to the
 * internet: unspecified and "this network" (Linux connects `0.0.0.0` and `::` to loopback),
 * loopback, private (RFC 1918, unique local), shared (carrier-grade NAT), link-local (the cloud
 * metadata services at 169.254.169.254 and `fd00:ec2::254` among them), IETF protocol
 * assignments, benchmarking, local-use NAT64, multicast and reserved. IPv4 written as IPv6
 * (mapped, compatible, NAT64) reaches here as its IPv4 address ({@link canonicalHost}).
 */
const INTERNAL_BLOCKS: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
  ['::', 128],
  ['::1', 128],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
];

const family = (address: string) => (isIP(address) === 6 ? 'ipv6' : 'ipv4');

const INTERNAL = (() => {
  const list = new BlockList();
  for (const [network, prefix] of INTERNAL_BLOCKS) list.addSubnet(network, prefix, family(network));
  return list;
})();

/**
 * Whether the kernel delivers a connection to `host` (canonical: an IPv4-mapped, translated,
 * compatible or NAT64 address is already its IPv4 one) to this machine: the unspecified
 * addresses (`0.0.0.0/8`, `::`, which Linux connects to as loopback), loopback itself, and every
 * address of this machine's own interfaces (a listener on all addresses answers there). Pure but
 * for reading the interfaces.
 */
export function routesToThisHost(host: string): boolean {
  if (isIP(host) === 0) return false;
  if (host === '::' || host === '::1') return true;
  if (isIP(host) === 4) {
    const first = Number(host.split('.')[0]);
    if (first === 0 || first === 127) return true;
  }
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (canonicalHost(a.address.split('%')[0]!) === host) return true;
  }
  return false;
}

/**
 * Whether `host` (a canonical address) is internal: in one of the blocks above, or an address of
 * this machine's own (its public interface address included).
 */
export function isInternalAddress(host: string): boolean {
  const kind = isIP(host);
  if (kind === 0) return false;
  return INTERNAL.check(host, kind === 6 ? 'ipv6' : 'ipv4') || routesToThisHost(host);
}

/** One `EXECUTOR_FETCH_INTERNAL` entry: an address, or a block as `<address>/<prefix>`. */
export function parseAddressBlock(entry: string): [string, number] | undefined {
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const kind = isIP(address);
  if (kind === 0) return undefined;
  const max = kind === 6 ? 128 : 32;
  if (slash < 0) return [address, max];
  const text = entry.slice(slash + 1);
  if (!/^\d{1,3}$/.test(text)) return undefined;
  const prefix = Number(text);
  return prefix <= max ? [address, prefix] : undefined;
}

/**
 * The internal addresses the operator lets http_fetch reach (`EXECUTOR_FETCH_INTERNAL`), as blocks
 * checked against the address a name resolved to, not against the name. Empty: none.
 */
export class InternalAllowance {
  private readonly allowed = new BlockList();
  private readonly empty: boolean;

  /** `entries` as {@link parseAddressBlock} reads them; an entry it cannot read is skipped. */
  constructor(entries: readonly string[]) {
    let any = false;
    for (const entry of entries) {
      const block = parseAddressBlock(entry);
      if (!block) continue;
      const canonical = canonicalHost(block[0]) ?? block[0];
      // A mapped IPv6 block (`::ffff:10.0.0.0/104`) names the IPv4 block every address of it is
      // checked as.
      const prefix =
        isIP(canonical) === 4 && isIP(block[0]) === 6 ? Math.max(0, block[1] - 96) : block[1];
      this.allowed.addSubnet(canonical, prefix, family(canonical));
      any = true;
    }
    this.empty = !any;
  }

  /** Whether a connection to `host` (a canonical address) is refused as internal. */
  refuses(host: string): boolean {
    if (!isInternalAddress(host)) return false;
    if (this.empty) return true;
    return !this.allowed.check(host, family(host));
  }
}

/** No internal address: the default. */
export const NO_INTERNAL_ADDRESSES = new InternalAllowance([]);
