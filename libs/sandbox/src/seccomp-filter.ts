/**
 * The seccomp filter every sandboxed run is started under (bubblewrap's `--seccomp FD`): a classic
 * BPF program, built here because it is small and fixed — no library compiles one at install
 * without a native build.
 *
 * What it refuses: a file mode with the set-user-ID or set-group-ID bit. Inside the sandbox the run
 * is uid 0 of a user namespace mapped to the executor's own uid — root, when the executor runs as
 * root — so a file it makes in its directory and marks `chmod 4755` is a set-user-ID-root program
 * on the host, for any local user who can reach the directory (the sandbox's own `nosuid` mounts
 * keep it harmless inside). `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `open`, `openat`, `creat`,
 * `mknod` and `mknodat` with such a mode fail with EPERM; `openat2` (its mode is behind a pointer
 * the filter cannot read) and `io_uring_setup` (whose operations seccomp never sees) fail with
 * ENOSYS, so callers fall back to the calls above; a call of another ABI on the same kernel (i386,
 * x32) fails with EPERM. Everything else is allowed: the sandbox's namespaces, not this filter, are
 * the boundary.
 */

/** `struct sock_filter` opcodes (linux/filter.h). */
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;

const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const EPERM = 1;
const ENOSYS = 38;

/** `struct seccomp_data` offsets. */
const NR = 0;
const ARCH = 4;
const argOffset = (i: number) => 16 + 8 * i; // the low 32 bits on a little-endian machine

/** S_ISUID | S_ISGID. */
const SETID_BITS = 0o6000;

interface ArchTable {
  audit: number;
  /** Syscall numbers at or above this are another ABI's (x32): refused. */
  otherAbiFrom?: number;
  /** Calls whose mode argument (by index) must not carry the set-ID bits. */
  modeArg: Readonly<Record<string, [nr: number, arg: number]>>;
  /** Calls refused outright with ENOSYS. */
  unsupported: readonly number[];
}

const ARCHES: Readonly<Record<string, ArchTable>> = {
  x64: {
    audit: 0xc000003e,
    otherAbiFrom: 0x40000000,
    modeArg: {
      open: [2, 2],
      creat: [85, 1],
      chmod: [90, 1],
      fchmod: [91, 1],
      mknod: [133, 1],
      openat: [257, 3],
      mknodat: [259, 2],
      fchmodat: [268, 2],
      fchmodat2: [452, 2],
    },
    unsupported: [425 /* io_uring_setup */, 437 /* openat2 */],
  },
  arm64: {
    audit: 0xc00000b7,
    modeArg: {
      mknodat: [33, 2],
      fchmod: [52, 1],
      fchmodat: [53, 2],
      openat: [56, 3],
      fchmodat2: [452, 2],
    },
    unsupported: [425, 437],
  },
};

type Insn = { code: number; jt: number | string; jf: number | string; k: number; label?: string };

/**
 * The filter for this machine's architecture (`process.arch`), as the bytes bubblewrap reads; null
 * on an architecture this table does not know (the runs then go without it).
 */
export function setIdFilter(arch: string = process.arch): Buffer | null {
  const table = ARCHES[arch];
  if (!table) return null;
  const prog: Insn[] = [];
  const emit = (code: number, k: number, jt: number | string = 0, jf: number | string = 0) =>
    prog.push({ code, jt, jf, k });
  emit(LD_W_ABS, ARCH);
  emit(JEQ_K, table.audit, 0, 'eperm');
  emit(LD_W_ABS, NR);
  if (table.otherAbiFrom !== undefined) emit(JGE_K, table.otherAbiFrom, 'eperm', 0);
  for (const nr of table.unsupported) emit(JEQ_K, nr, 'enosys', 0);
  const args = new Set<number>();
  for (const [nr, arg] of Object.values(table.modeArg)) {
    emit(JEQ_K, nr, `arg${arg}`, 0);
    args.add(arg);
  }
  emit(RET_K, RET_ALLOW);
  // BPF jumps forward only: each check ends in its own allow.
  for (const arg of args) {
    prog.push({ code: LD_W_ABS, jt: 0, jf: 0, k: argOffset(arg), label: `arg${arg}` });
    emit(JSET_K, SETID_BITS, 'eperm', 0);
    emit(RET_K, RET_ALLOW);
  }
  prog.push({ code: RET_K, jt: 0, jf: 0, k: RET_ERRNO | EPERM, label: 'eperm' });
  prog.push({ code: RET_K, jt: 0, jf: 0, k: RET_ERRNO | ENOSYS, label: 'enosys' });

  const at = new Map(prog.flatMap((insn, i) => (insn.label ? [[insn.label, i] as const] : [])));
  const out = Buffer.alloc(prog.length * 8);
  prog.forEach((insn, i) => {
    // A jump's offsets count the instructions after it.
    const rel = (target: number | string) => {
      if (typeof target === 'number') return target;
      const offset = at.get(target)! - i - 1;
      if (offset < 0 || offset > 255)
        throw new Error(`seccomp filter: jump to ${target} out of range`);
      return offset;
    };
    out.writeUInt16LE(insn.code, i * 8);
    out.writeUInt8(rel(insn.jt), i * 8 + 2);
    out.writeUInt8(rel(insn.jf), i * 8 + 3);
    out.writeUInt32LE(insn.k >>> 0, i * 8 + 4);
  });
  return out;
}
