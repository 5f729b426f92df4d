/** An OCI seccomp profile (the fields Toolgate writes). */
export interface SeccompProfile {
  defaultAction: 'SCMP_ACT_ALLOW';
  /** Every ABI this machine's kernel runs: the rules bind a 32-bit program's calls too. */
  architectures?: string[];
  syscalls: {
    names: string[];
    action: 'SCMP_ACT_ERRNO';
    errnoRet: number;
    args?: { index: number; value: number; valueTwo: number; op: 'SCMP_CMP_MASKED_EQ' }[];
  }[];
}

/**
 * The ABIs a kernel of this architecture runs (as runc names them), as Docker's default profile
 * lists them: without them a rule binds the native ABI only, and a 32-bit program's `chmod` (a
 * call of another number) would pass every rule.
 */
const ABIS: Readonly<Record<string, readonly string[]>> = {
  x64: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'],
  arm64: ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM'],
};

const EPERM = 1;
const ENOSYS = 38;

/**
 * System calls a tool never needs and that widen the kernel surface a contained process can reach:
 * without capabilities most of them fail anyway, but creating a user namespace does not need one —
 * and inside it a process has every capability again, for mounts and the rest.
 */
const DENIED = [
  'acct',
  'add_key',
  'bpf',
  'chroot',
  'delete_module',
  'fanotify_init',
  'finit_module',
  'fsconfig',
  'fsmount',
  'fsopen',
  'fspick',
  'init_module',
  'io_uring_enter',
  'io_uring_register',
  'io_uring_setup',
  'kexec_file_load',
  'kexec_load',
  'keyctl',
  'lookup_dcookie',
  'mount',
  'mount_setattr',
  'move_mount',
  'name_to_handle_at',
  'open_by_handle_at',
  'open_tree',
  'perf_event_open',
  'pivot_root',
  'process_vm_readv',
  'process_vm_writev',
  'ptrace',
  'quotactl',
  'reboot',
  'request_key',
  'setns',
  'swapoff',
  'swapon',
  'syslog',
  'umount2',
  'unshare',
  'userfaultfd',
];

/** clone(2) flags that create namespaces (CLONE_NEWNS … CLONE_NEWNET, CLONE_NEWCGROUP). */
const NAMESPACE_FLAGS = [
  0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
];

/**
 * Calls that set a file's mode, by the index of their mode argument. The container runs as uid 0
 * of the host (without capabilities it still owns what it creates in `/work`), so a mode with the
 * set-user-ID or set-group-ID bit would leave a set-ID-root program in the call's directory on
 * the host. `openat2` passes its mode in memory, where a filter cannot read it: ENOSYS, so the C
 * library falls back to `openat`.
 */
const MODE_ARG: readonly [name: string, index: number][] = [
  ['chmod', 1],
  ['fchmod', 1],
  ['fchmodat', 2],
  ['fchmodat2', 2],
  ['open', 2],
  ['openat', 3],
  ['creat', 1],
  ['mknod', 1],
  ['mknodat', 2],
];
const SET_ID_BITS = [0o4000, 0o2000];

/**
 * A deny-list on top of runc's defaults: the calls above fail with EPERM, clone(2) with a
 * namespace flag too, and clone3(2) with ENOSYS so the C library falls back to clone(2), whose
 * flags a filter can read (clone3 passes them in memory); a mode with a set-ID bit fails with
 * EPERM (see {@link MODE_ARG}). Everything else is allowed: tools are ordinary programs and an
 * allow-list would break them in ways nobody could predict. Pure.
 */
export function seccompProfile(arch: string = process.arch): SeccompProfile {
  const architectures = ABIS[arch];
  return {
    defaultAction: 'SCMP_ACT_ALLOW',
    ...(architectures ? { architectures: [...architectures] } : {}),
    syscalls: [
      { names: DENIED, action: 'SCMP_ACT_ERRNO', errnoRet: EPERM },
      { names: ['clone3', 'openat2'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS },
      ...MODE_ARG.flatMap(([name, index]) =>
        SET_ID_BITS.map((bit) => ({
          names: [name],
          action: 'SCMP_ACT_ERRNO' as const,
          errnoRet: EPERM,
          args: [{ index, value: bit, valueTwo: bit, op: 'SCMP_CMP_MASKED_EQ' as const }],
        })),
      ),
      ...NAMESPACE_FLAGS.map((flag) => ({
        names: ['clone'],
        action: 'SCMP_ACT_ERRNO' as const,
        errnoRet: EPERM,
        args: [{ index: 0, value: flag, valueTwo: flag, op: 'SCMP_CMP_MASKED_EQ' as const }],
      })),
    ],
  };
}
