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

/**
 * One `EXECUTOR_FETCH_INTERNAL` entry: an address or an `<address>/<prefix>` block, on every port,
 * or on one port when it ends in `:<port>` — an IPv6 one in brackets (`127.0.0.1:8080`,
 * `10.0.0.0/8:5432`, `[::1]:8080`, `[fd00::/8]:443`).
 */
export interface InternalEntry {
  address: string;
  prefix: number;
  /** The one port it opens; every port when absent. */
  port?: number;
}

/** An entry's {@link InternalEntry}, or undefined when its text is not one (the start refuses it). */
export function parseInternalEntry(entry: string): InternalEntry | undefined {
  // A zone (`fe80::1%eth0`) would be dropped by the check, opening the address on every link.
  if (entry.includes('%')) return undefined;
  let block = entry;
  let portText: string | undefined;
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(entry);
  if (bracketed) {
    block = bracketed[1]!;
    portText = bracketed[2];
    if (isIP(block.split('/')[0]!) !== 6) return undefined;
  } else if (entry.split(':').length === 2) {
    // One colon: an IPv4 address or block and a port (an IPv6 address has two or more).
    [block, portText] = entry.split(':') as [string, string];
    if (isIP(block.split('/')[0]!) !== 4) return undefined;
  }
  const parsed = parseBlock(block);
  // `::1:8080` is an address — IPv4-compatible (`::/96`), deprecated, never meant — not `::1` on
  // port 8080 (which is written `[::1]:8080`): refused rather than opened on every port.
  if (parsed && !bracketed && isIP(parsed.address) === 6 && ipv4Compatible(parsed.address))
    return undefined;
  if (!parsed || portText === undefined) return parsed;
  if (!/^\d{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  return port >= 1 && port <= 65_535 ? { ...parsed, port } : undefined;
}

const IPV4_COMPATIBLE = (() => {
  const list = new BlockList();
  list.addSubnet('::', 96, 'ipv6');
  return list;
})();

/** In `::/96` but neither `::` nor `::1`: an IPv4-compatible IPv6 address. */
function ipv4Compatible(address: string): boolean {
  const canonical = canonicalHost(address);
  return IPV4_COMPATIBLE.check(address, 'ipv6') && canonical !== '::' && canonical !== '::1';
}

function parseBlock(entry: string): InternalEntry | undefined {
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const kind = isIP(address);
  if (kind === 0) return undefined;
  const max = kind === 6 ? 128 : 32;
  if (slash < 0) return { address, prefix: max };
  const text = entry.slice(slash + 1);
  if (!/^\d{1,3}$/.test(text)) return undefined;
  const prefix = Number(text);
  return prefix <= max ? { address, prefix } : undefined;
}

/**
 * The ports Toolgate's own state is served on by default: the broker's clients (4222), routes
 * (6222), leaf nodes (7422) and monitoring (8222), and PostgreSQL (5432). An internal entry without
 * a port does not open them (nor the ports the executor's own `NATS_URL` and `DATABASE_URL` name,
 * which its configuration adds): only an entry naming the port does — so `127.0.0.1`, written to
 * let a tool reach a local service, does not also hand it the broker and the database.
 */
export const SERVICE_PORTS: readonly number[] = [4222, 5432, 6222, 7422, 8222];

/** Why {@link InternalAllowance} refuses a connection: not opened, or a service port not named. */
export type InternalRefusal = 'internal' | 'service-port';

/**
 * The internal addresses the operator lets http_fetch and tools' egress reach
 * (`EXECUTOR_FETCH_INTERNAL`), as blocks on every port but the service ports, or on one, checked
 * against the address a name resolved to and the port connected to, not against the name. Empty:
 * none.
 */
export class InternalAllowance {
  private readonly everyPort = new BlockList();
  private readonly onPort = new Map<number, BlockList>();
  private readonly empty: boolean;
  private readonly servicePorts: ReadonlySet<number>;

  /**
   * `entries` as {@link parseInternalEntry} reads them; an entry it cannot read is skipped.
   * `servicePorts`: the ports an entry without a port leaves closed ({@link SERVICE_PORTS} and
   * what the executor's configuration adds).
   */
  constructor(entries: readonly string[], servicePorts: readonly number[] = SERVICE_PORTS) {
    this.servicePorts = new Set(servicePorts);
    let any = false;
    for (const text of entries) {
      const entry = parseInternalEntry(text);
      if (!entry) continue;
      const canonical = canonicalHost(entry.address) ?? entry.address;
      // A mapped IPv6 block (`::ffff:10.0.0.0/104`) names the IPv4 block every address of it is
      // checked as.
      const prefix =
        isIP(canonical) === 4 && isIP(entry.address) === 6
          ? Math.max(0, entry.prefix - 96)
          : entry.prefix;
      let list = this.everyPort;
      if (entry.port !== undefined) {
        list = this.onPort.get(entry.port) ?? new BlockList();
        this.onPort.set(entry.port, list);
      }
      list.addSubnet(canonical, prefix, family(canonical));
      any = true;
    }
    this.empty = !any;
  }

  /** Why a connection to `host` (a canonical address) on `port` is refused, if it is. */
  refusal(host: string, port: number): InternalRefusal | undefined {
    if (!isInternalAddress(host)) return undefined;
    if (this.empty) return 'internal';
    const kind = family(host);
    if (this.onPort.get(port)?.check(host, kind)) return undefined;
    if (!this.everyPort.check(host, kind)) return 'internal';
    return this.servicePorts.has(port) ? 'service-port' : undefined;
  }
}

/** No internal address: the default. */
export const NO_INTERNAL_ADDRESSES = new InternalAllowance([]);
