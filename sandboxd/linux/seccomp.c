/*
 * The syscall filter: default allow, and a deny list of what widens the
 * kernel's attack surface or reaches outside the run (namespaces, mounts,
 * keyrings, BPF, tracing, io_uring, module and kexec loading, terminal
 * injection, socket families other than Unix and — unless the network
 * mode allows it — IP).  Built with libseccomp in sandboxd before fork,
 * exported as classic BPF, and loaded in the child with one prctl().
 *
 * A default-allow list is chosen over an allow list because the runs are
 * arbitrary build tools: an allow list breaks them with every new glibc.
 * The deny list is the union of Docker's default profile and systemd's
 * @mount, @privileged-only and @obsolete groups, minus what the dropped
 * capabilities already make harmless and builds still use.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <linux/netlink.h>

#include "sandboxd/linux/layers.h"

/* The terminal ioctls; the kernel compares only the low 32 bits of the
 * request (it is an unsigned int there), so the filter does too. */
#define SBX_TIOCSTI 0x5412
#define SBX_TIOCLINUX 0x541C
#define SBX_LOW32 0xffffffffULL

/* Socket families below this bound are refused one by one unless
 * allowed; from it up, all at once: it is one above the highest family
 * ever allowed (AF_NETLINK, 16). */
#define SBX_SECCOMP_AF_ENUM (AF_NETLINK + 1)

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

/* Syscalls newer than libseccomp 2.5.4 knows, by their number in the
 * table shared by every architecture since Linux 5.1 (424 and up). */
#define SBX_NR_OPEN_TREE_ATTR 467 /* Linux 6.15, the mount API */
#define SBX_NR_FCHMODAT2 452	  /* Linux 6.6 */

/* Refused with EPERM whatever their arguments. */
static const char *const sbx_deny_names[] = {
    /* Namespaces: a nested user namespace gives back every capability
	 * inside it, and with it the kernel code behind them. */
    "unshare",
    "setns",
    /* Mounts, old and new API, and chroot. */
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    /* Keyrings are not namespaced: the operator's keys live there. */
    "keyctl",
    "add_key",
    "request_key",
    /* Large kernel attack surface, rarely needed by builds. */
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    /* Other processes' memory and descriptors. */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    /* Kernel code and the machine itself. */
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "iopl",
    "ioperm",
    "vhangup",
    "syslog",
    "settimeofday",
    "clock_settime",
    "stime",
    "lookup_dcookie",
    "nfsservctl",
    /* File handles bypass path-based checks (the "shocker" escape). */
    "open_by_handle_at",
    "name_to_handle_at",
    /* Obsolete. */
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "vm86",
    "vm86old",
    NULL,
};

/* Namespace flags clone() may not carry.  CLONE_NEWTIME is left out: in
 * clone() its bit is part of the exit signal, and clone3 and unshare, the
 * only ways to use it, are refused whole. */
static const uint64_t sbx_clone_ns_flags[] = {
    CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
};

static int deny_name(scmp_filter_ctx ctx, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return 0; /* unknown to this libseccomp: not on this arch */
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
}

/* Whether socket() (pair false) or socketpair() (pair true) may create
 * sockets of family af in mode net. */
static bool family_allowed(unsigned af, enum sbx_net net, bool pair)
{
	if (af == AF_UNIX)
		return true;
	if (pair)
		return false;
	/* IP sockets by mode: none has none; broker and proxy reach only
	 * 127.0.0.1:PORT, so IPv4 is enough (Landlock narrows connect to
	 * that port, the namespace holds nothing else); loopback and host
	 * have both. */
	if (af == AF_INET)
		return net != SBX_NET_NONE;
	if (af == AF_INET6)
		return net == SBX_NET_LOOPBACK || net == SBX_NET_HOST;
	/* Netlink route is allowed for socket(): getifaddrs() and
	 * getaddrinfo(AI_ADDRCONFIG) read it, it shows only the run's own
	 * network namespace (or the host's interfaces in host mode), and
	 * changing anything through it needs CAP_NET_ADMIN, which the run
	 * does not have.  Every other netlink protocol is refused below. */
	return af == AF_NETLINK;
}

/*
 * Every family but the allowed ones: those below SBX_SECCOMP_AF_ENUM one
 * by one (on the low 32 bits, the kernel's int), and every value from it
 * up whole, on all 64 bits, so that a family with high bits set is
 * refused too (the kernel would read only the low ones).  A few rules
 * instead of one per family keep the program short: the kernel checks,
 * converts and compiles it on every run (bench/README.md).
 */
static int deny_socket_families(scmp_filter_ctx ctx, int nr, enum sbx_net net,
				bool pair)
{
	unsigned limit = pair ? AF_UNIX + 1 : SBX_SECCOMP_AF_ENUM;
	int r;

	for (unsigned af = 0; af < limit; af++) {
		if (family_allowed(af, net, pair))
			continue;
		r = seccomp_rule_add(
		    ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, SBX_LOW32, af));
		if (r < 0)
			return r;
	}
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
			     SCMP_A0(SCMP_CMP_GE, limit));
	if (r < 0 || pair)
		return r;
	/* Netlink: every protocol but NETLINK_ROUTE (0), on all 64 bits. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2,
			     SCMP_A0(SCMP_CMP_MASKED_EQ, SBX_LOW32, AF_NETLINK),
			     SCMP_A2(SCMP_CMP_GE, NETLINK_ROUTE + 1));
	if (r < 0)
		return r;
	/* MPTCP is refused in every mode: it is TCP for the user but a
	 * separate, younger protocol stack in the kernel, and older kernels'
	 * Landlock TCP rules did not apply to it.  Builds do not need it. */
	return seccomp_rule_add(
	    ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
	    SCMP_A2(SCMP_CMP_MASKED_EQ, SBX_LOW32, IPPROTO_MPTCP));
}

/*
 * personality(ADDR_NO_RANDOMIZE) would turn ASLR off for what the run
 * starts next.  The query value 0xffffffff has the bit set too, and
 * libseccomp cannot put two comparisons on one argument, so the rule is
 * spread over the other 31 bits: "the flag is set and bit b is clear"
 * matches every value with the flag except 0xffffffff.
 */
static int deny_personality(scmp_filter_ctx ctx)
{
	int nr = SCMP_SYS(personality), r;

	for (unsigned b = 0; b < 32; b++) {
		uint64_t bit = 1ULL << b;

		if (bit == ADDR_NO_RANDOMIZE)
			continue;
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ,
					     ADDR_NO_RANDOMIZE | bit,
					     ADDR_NO_RANDOMIZE));
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Set-user-ID and set-group-ID modes.  What a run creates in the workspace
 * is stored as the operator's (through the idmapped bind as root, as the
 * operator's own uid without): a setuid file planted there would run as
 * the operator, or as root, for whoever executes it on the host later —
 * and an empty one the operator's own build writes into as root keeps the
 * bit (CAP_FSETID).  So no call that sets a mode may carry either bit:
 * chmod and its variants, and the calls that create with a mode.  openat2
 * passes its mode in memory the filter cannot read: ENOSYS, and libc and
 * the programs that try it fall back to openat.
 */
static const struct {
	const char *name; /* NULL: by number */
	int nr;
	unsigned int arg; /* the mode's argument */
} sbx_mode_calls[] = {
    {"chmod", 0, 1},	{"fchmod", 0, 1},
    {"fchmodat", 0, 2}, {NULL, SBX_NR_FCHMODAT2, 2},
    {"creat", 0, 1},	{"open", 0, 2},
    {"openat", 0, 3},	{"mknod", 0, 1},
    {"mknodat", 0, 2},
};

static int deny_setid_modes(scmp_filter_ctx ctx)
{
	static const uint64_t bits[] = {S_ISUID, S_ISGID};
	int nr, r;

	for (size_t i = 0;
	     i < sizeof(sbx_mode_calls) / sizeof(sbx_mode_calls[0]); i++) {
		nr = sbx_mode_calls[i].name
			 ? seccomp_syscall_resolve_name(sbx_mode_calls[i].name)
			 : sbx_mode_calls[i].nr;
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		for (size_t b = 0; b < 2; b++) {
			struct scmp_arg_cmp c = {
			    .arg = sbx_mode_calls[i].arg,
			    .op = SCMP_CMP_MASKED_EQ,
			    .datum_a = bits[b],
			    .datum_b = bits[b],
			};

			r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM),
						   nr, 1, &c);
			if (r < 0)
				return r;
		}
	}
	nr = seccomp_syscall_resolve_name("openat2");
	if (nr == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
}

static int add_rules(scmp_filter_ctx ctx, enum sbx_net net)
{
	int r;

	for (size_t i = 0; sbx_deny_names[i]; i++) {
		r = deny_name(ctx, sbx_deny_names[i]);
		if (r < 0)
			return r;
	}
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SBX_NR_OPEN_TREE_ATTR,
			     0);
	if (r < 0)
		return r;
	/* clone3 passes its flags in memory the filter cannot read: ENOSYS
	 * makes glibc fall back to clone(), whose flags it can. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r < 0)
		return r;
	for (size_t i = 0;
	     i < sizeof(sbx_clone_ns_flags) / sizeof(sbx_clone_ns_flags[0]);
	     i++) {
		uint64_t f = sbx_clone_ns_flags[i];

		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
				     SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
		if (r < 0)
			return r;
	}
	/* Terminal injection: TIOCSTI pushes bytes into a terminal's input,
	 * TIOCLINUX can paste the console selection.  The kernel may also
	 * refuse TIOCSTI (dev.tty.legacy_tiocsti = 0); this holds anyway. */
	r = seccomp_rule_add(
	    ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, SBX_LOW32, SBX_TIOCSTI));
	if (r < 0)
		return r;
	r = seccomp_rule_add(
	    ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, SBX_LOW32, SBX_TIOCLINUX));
	if (r < 0)
		return r;
	r = deny_socket_families(ctx, SCMP_SYS(socket), net, false);
	if (r < 0)
		return r;
	r = deny_socket_families(ctx, SCMP_SYS(socketpair), net, true);
	if (r < 0)
		return r;
	r = deny_setid_modes(ctx);
	if (r < 0)
		return r;
	return deny_personality(ctx);
}

/* Export the program into a memfd and read it back: libseccomp 2.5 can
 * only write it to a descriptor. */
static int export_prog(scmp_filter_ctx ctx, struct sock_fprog *ret)
{
	struct sock_filter *insns = NULL;
	struct stat st;
	size_t got = 0;
	int fd, r;

	fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		goto out;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
	    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		r = -E2BIG;
		goto out;
	}
	insns = malloc((size_t)st.st_size);
	if (!insns) {
		r = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, (char *)insns + got,
				  (size_t)st.st_size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			goto out;
		}
		got += (size_t)n;
	}
	ret->len = (unsigned short)(got / sizeof(struct sock_filter));
	ret->filter = insns;
	insns = NULL;
	r = 0;
out:
	free(insns);
	close(fd);
	return r;
}

int layer_seccomp_build(enum sbx_net net, struct sock_fprog *ret)
{
	scmp_filter_ctx ctx;
	int r;

	if (!ret)
		return -EINVAL;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	/* Only the native architecture: an ia32 (int $0x80) or x32 system
	 * call is not checked against the rules above, so the process making
	 * one is killed.  A 32-bit binary in a run dies with SIGSYS on its
	 * first system call, which is loud and clear. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
			     SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		goto out;
	/* A binary tree of syscall numbers instead of a linear list: every
	 * allowed syscall of every run pays for the filter's length. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		goto out;
	r = add_rules(ctx, net);
	if (r < 0)
		goto out;
	r = export_prog(ctx, ret);
out:
	seccomp_release(ctx);
	return r;
}

void layer_seccomp_free(struct sock_fprog *prog)
{
	if (!prog)
		return;
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}

int layer_seccomp_load(const struct sock_fprog *prog)
{
	if (!prog || !prog->filter || prog->len == 0)
		return -EINVAL;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) < 0)
		return -errno;
	return 0;
}
