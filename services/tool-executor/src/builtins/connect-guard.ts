import { promises as dns, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import { canonicalHost } from '@toolgate/permissions';
import type { CheckDomain } from './builtin-deps';
import {
  InternalAllowance,
  NO_INTERNAL_ADDRESSES,
  routesToThisHost,
  SERVICE_PORTS,
  type InternalRefusal,
} from './internal-addresses';

/**
 * The connection half of the domain check: a `lookup` for sockets (an undici agent's, a proxied
 * tunnel's) that checks every address a name resolves to before handing it to the socket, so the
 * socket connects to exactly the addresses that were allowed and nothing resolves the name a
 * second time in between. One guard serves connections to one `port` (an internal address may be
 * opened on one port only). The first refusal is kept so the caller fails with it rather than with
 * the socket's generic error. `who` names the caller in messages (`http_fetch`, a tool's egress).
 */
export class ConnectGuard {
  refusal: ToolgateError | undefined = undefined;

  constructor(
    private readonly checkDomain: CheckDomain,
    private readonly internal: InternalAllowance,
    private readonly port: number,
    private readonly who: string,
  ) {}

  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.allowedAddresses(hostname, options.family).then(
      (addresses) => {
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };

  private async allowedAddresses(
    hostname: string,
    family: number | string | undefined,
  ): Promise<LookupAddress[]> {
    const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    const literal = isIP(bare);
    const addresses: LookupAddress[] =
      literal !== 0
        ? [{ address: bare, family: literal }]
        : // The canonical name (`LocalHost.` is `localhost`): what the rules saw is what resolves.
          await dns.lookup(canonicalHost(bare) ?? bare, {
            all: true,
            family: lookupFamily(family),
          });
    if (addresses.length === 0) throw Object.assign(new Error('no address'), { code: 'ENOTFOUND' });
    // Every address must pass: a name that resolves to an allowed and a denied address is refused,
    // whichever of them the socket would have tried first.
    for (const a of addresses) {
      const host = canonicalHost(a.address);
      const refused =
        host === undefined
          ? 'rules'
          : await addressRefusal(this.checkDomain, this.internal, host, this.port);
      if (refused) {
        const address = host ?? a.address;
        this.refusal ??= new ToolgateError(
          ErrorCode.Denied,
          refused === 'rules'
            ? `${this.who}: host ${bare} resolves to ${address}, which the domain rules do not allow`
            : `${this.who}: host ${bare} resolves to ${address}, ${internalRefusal(refused, address, this.port)}`,
          {
            details: {
              host: bare,
              address,
              ...(refused === 'rules' ? {} : internalDetails(refused, this.port)),
            },
          },
        );
        throw Object.assign(new Error(this.refusal.message), { code: 'EACCES' });
      }
    }
    return addresses;
  }
}

function lookupFamily(family: number | string | undefined): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}

async function verdictOf(checkDomain: CheckDomain, host: string): Promise<unknown> {
  try {
    return await checkDomain(host);
  } catch {
    return 'deny'; // fail closed
  }
}

/** How loopback is named in domain rules: an address routed to this host must pass all three. */
const LOOPBACK_NAMES = ['127.0.0.1', '::1', 'localhost'];

/** Why an internal address is refused, after "host X is" or "host X resolves to Y,". */
function internalRefusal(why: InternalRefusal, address: string, port: number): string {
  if (why === 'service-port') {
    const named = isIP(address) === 6 ? `[${address}]:${port}` : `${address}:${port}`;
    return `an internal address, and port ${port} is a service port (the broker's or the database's): EXECUTOR_FETCH_INTERNAL opens it only by naming the port (${named}), never with an entry that opens every port`;
  }
  return `an internal address (loopback, this host, a private, link-local or reserved network): the executor connects to one only when EXECUTOR_FETCH_INTERNAL names it, on every port or on port ${port}`;
}

function internalDetails(why: InternalRefusal, port: number) {
  return { port, internal: true, ...(why === 'service-port' ? { servicePort: true } : {}) };
}

/** The cached allowance of a policy's `http.internal` (one array per parsed policy). */
const allowances = new WeakMap<
  readonly string[],
  { servicePorts: readonly number[]; allowance: InternalAllowance }
>();
export function internalAllowance(
  entries: readonly string[],
  /** The ports an entry without a port leaves closed (`SERVICE_PORTS` and the configured ones). */
  servicePorts: readonly number[] = SERVICE_PORTS,
): InternalAllowance {
  if (entries.length === 0) return NO_INTERNAL_ADDRESSES;
  const cached = allowances.get(entries);
  if (cached?.servicePorts === servicePorts) return cached.allowance;
  const allowance = new InternalAllowance(entries, servicePorts);
  allowances.set(entries, { servicePorts, allowance });
  return allowance;
}

/**
 * Why connecting to an address and port is refused, if it is: an internal one the operator did not
 * name with that port (`internal`, checked first: no domain rule opens it), or the domain rules
 * (`rules`, which name hosts, not ports) — on the
 * address itself and, when it reaches this machine whatever its spelling
 * ({@link routesToThisHost}), on loopback under each name a rule may give it, so `http://0/`,
 * `[::]` or the host's own address meet a rule denying `127.0.0.0/8`, `::1` or `localhost`.
 * Decided on the address, not the spelling.
 */
async function addressRefusal(
  checkDomain: CheckDomain,
  internal: InternalAllowance,
  host: string,
  port: number,
): Promise<InternalRefusal | 'rules' | undefined> {
  const closed = internal.refusal(host, port);
  if (closed) return closed;
  // A loopback address names itself; any other way to this machine is loopback by another name.
  const hosts = routesToThisHost(host) && !isLoopback(host) ? [host, ...LOOPBACK_NAMES] : [host];
  for (const h of hosts) {
    const verdict = await verdictOf(checkDomain, h);
    if (verdict !== 'allow') return 'rules';
  }
  return undefined;
}

function isLoopback(host: string): boolean {
  return host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

/**
 * The host half of the domain check, before anything is resolved: `denied` (with
 * `details.internal` for an internal address the operator did not name with `port`) unless the
 * rules allow `hostname` — an address literal is decided here in full, it never reaches a lookup.
 */
export async function assertHostAllowed(
  checkDomain: CheckDomain,
  internal: InternalAllowance,
  hostname: string,
  port: number,
  who: string,
): Promise<void> {
  const host = canonicalHost(hostname);
  const refused =
    host === undefined ? 'rules' : await addressRefusal(checkDomain, internal, host, port);
  if (refused === 'rules' || host === undefined) {
    throw new ToolgateError(
      ErrorCode.Denied,
      `${who}: host ${host ?? hostname} is not allowed by the domain rules`,
      { details: { host: host ?? hostname } },
    );
  }
  if (refused) {
    throw new ToolgateError(
      ErrorCode.Denied,
      `${who}: host ${host} is ${internalRefusal(refused, host, port)}`,
      { details: { host, ...internalDetails(refused, port) } },
    );
  }
}
