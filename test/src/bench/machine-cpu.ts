import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { descendants, procStat } from '@toolgate/sandbox';
import { DATABASE_URL, NATS_URL } from '@toolgate/testing';

/**
 * Where a phase's CPU went on this machine, beyond the bench's own processes: the broker's and the
 * database's CPU time (found by the port they listen on, from /proc), and the machine's busy and
 * stolen time (/proc/stat). Linux only, and it needs to see the servers' processes (the bench runs
 * as root next to them here); anything it cannot see is left out of the report, never guessed.
 */
export interface CpuSpent {
  /** CPU seconds of the nats-server listening on the bench's port. */
  brokerSeconds?: number;
  /** CPU seconds of the PostgreSQL server listening on the bench's port: postmaster and backends. */
  databaseSeconds?: number;
  /** Busy fraction of the machine's CPUs over the phase (0–1), every process counted. */
  machineBusy?: number;
  /** Fraction of the CPUs' time the hypervisor gave to someone else (0–1): a noisy neighbour. */
  steal?: number;
}

/** A started measurement: `stop()` answers what was spent since. */
export interface CpuMeter {
  stop(): CpuSpent;
}

/** Starts measuring the broker and the database the bench uses (NATS_URL, DATABASE_URL). */
export function startCpuMeter(): CpuMeter {
  const { broker, postmaster } = (servers ??= findServers());
  // The postmaster and every process under it: PostgreSQL's backends and workers.
  const database = () =>
    postmaster === undefined ? undefined : [postmaster, ...descendants(postmaster)];
  const broker0 = broker === undefined ? undefined : procCpuSeconds(broker);
  const database0 = sumCpu(database());
  const machine0 = machineTicks();
  return {
    stop() {
      const machine1 = machineTicks();
      const spent: CpuSpent = {};
      if (broker !== undefined && broker0 !== undefined)
        spent.brokerSeconds = procCpuSeconds(broker) - broker0;
      const database1 = sumCpu(database());
      // Backends that exited during the phase take their time with them: a lower bound then.
      if (database0 !== undefined && database1 !== undefined)
        spent.databaseSeconds = Math.max(0, database1 - database0);
      if (machine0 && machine1) {
        const total = machine1.total - machine0.total;
        if (total > 0) {
          spent.machineBusy = (machine1.busy - machine0.busy) / total;
          spent.steal = (machine1.steal - machine0.steal) / total;
        }
      }
      return spent;
    },
  };
}

let servers: { broker?: number; postmaster?: number } | undefined;

/** The broker's and the postmaster's pids, when both listen on this machine's loopback. */
function findServers(): { broker?: number; postmaster?: number } {
  const local = (u: URL) => ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname);
  const nats = new URL(NATS_URL);
  const db = new URL(DATABASE_URL);
  return {
    broker: local(nats) ? listenerPid(Number(nats.port || 4222)) : undefined,
    postmaster: local(db) ? listenerPid(Number(db.port || 5432)) : undefined,
  };
}

/** The pid whose socket listens on this TCP port (IPv4 or IPv6), when this process may see it. */
export function listenerPid(port: number): number | undefined {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st …: local <addr>:<port>, st 0A is LISTEN, inode tenth.
      const [, local, , state, , , , , , inode] = line.trim().split(/\s+/);
      if (inode !== undefined && local?.endsWith(`:${hexPort}`) && state === '0A')
        inodes.add(inode);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const pid of pids()) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m?.[1] !== undefined && inodes.has(m[1])) return pid;
      } catch {
        // the descriptor closed while we looked
      }
    }
  }
  return undefined;
}

function pids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

function sumCpu(group: number[] | undefined): number | undefined {
  if (!group) return undefined;
  return group.reduce((sum, pid) => sum + procCpuSeconds(pid), 0);
}

/**
 * The write system calls this process has made (`syscw` in /proc/self/io; undefined where it cannot
 * be read): each socket write wakes its reader, what a message costs beyond its handling.
 */
export function writeSyscalls(): number | undefined {
  try {
    const m = /^syscw: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** utime + stime of a process, from /proc (Linux; 0 elsewhere or once it is gone). */
export function procCpuSeconds(pid: number): number {
  const fields = procStat(pid);
  if (!fields) return 0;
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/** The machine's CPU ticks from /proc/stat's first line: busy (not idle or iowait), steal, total. */
function machineTicks(): { busy: number; steal: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice
    const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
    if (ticks.length < 8 || ticks.some(Number.isNaN)) return undefined;
    const [user, nice, system, idle, iowait, irq, softirq, steal] = ticks as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const busy = user + nice + system + irq + softirq;
    return { busy, steal, total: busy + idle + iowait + steal };
  } catch {
    return undefined;
  }
}
