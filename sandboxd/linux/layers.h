/*
 * The kernel confinement layers sandboxd applies to every run on Linux,
 * each behind a small function so that spawn.c reads as a list of steps:
 *
 *   sandboxd, before the clone:      layer_seccomp_build()
 *   the command, before its exec:    layer_landlock_apply(), no_new_privs,
 *                                    layer_caps_drop_all(), layer_seccomp_load()
 *
 * Everything called in the children is async-signal-safe: no malloc, no
 * stdio, no locks.  They share sandboxd's memory until they exec
 * (spawn.c), which allows even less than the child of a fork may do.
 */
#ifndef SPD_SANDBOXD_LINUX_LAYERS_H
#define SPD_SANDBOXD_LINUX_LAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/sandbox.h" /* enum sbx_net, struct sbx_layers */

struct sock_fprog;

/* ---- Landlock ---------------------------------------------------------- */

/* How many paths a plan may name: a named limit so the child can use
 * fixed arrays; a plan with more is refused before fork. */
#define SBX_LANDLOCK_MAX_PATHS 128

struct sbx_landlock_plan {
	/* NULL-terminated lists of absolute paths as seen inside the run.
	 * read: read files, list directories, execute.
	 * write: everything Landlock can grant (including REFER, TRUNCATE,
	 * IOCTL_DEV where the ABI has them), below that path, but for
	 * making FIFOs: only below /tmp, /var/tmp and /dev with
	 * private_tmp (landlock.c, ll_fifo_path).
	 * Paths that do not exist are skipped. */
	const char *const *read_paths;
	const char *const *write_paths;
	/* /tmp, /var/tmp and /dev are the run's own (the mount plan's). */
	bool private_tmp;
	/* NONE: no TCP bind or connect (ABI 4+); BROKER and PROXY: connect
	 * to broker_port only, no bind; LOOPBACK and HOST: allowed (the
	 * network namespace bounds loopback). */
	enum sbx_net net;
	uint16_t broker_port;
	/* Scope abstract Unix sockets and signals to the run (ABI 6+). */
	bool scope;
};

/* The Landlock ABI version the kernel offers; 0 when Landlock is absent or
 * disabled.  Safe anywhere. */
int layer_landlock_abi(void);

/*
 * Restrict the calling process (and its future children) to the plan, at
 * the highest ABI the kernel offers.  Requires no_new_privs or
 * CAP_SYS_ADMIN in the current user namespace.  Returns the ABI applied
 * (> 0), or -errno (-EOPNOTSUPP when Landlock is absent).
 * Async-signal-safe.
 */
int layer_landlock_apply(const struct sbx_landlock_plan *plan);

/* ---- seccomp ----------------------------------------------------------- */

/*
 * Build, in sandboxd before any fork, the BPF syscall filter for a network
 * mode with libseccomp: refuses namespace creation and joining (clone and
 * clone3 with namespace flags, clone3 as ENOSYS), the mount family and the
 * new mount API, keyctl/add_key/request_key, bpf, ptrace,
 * process_vm_readv/writev, perf_event_open, io_uring_*, userfaultfd, kexec
 * and module loading, TIOCSTI/TIOCLINUX whatever the upper 32 bits,
 * socket families other than AF_UNIX, AF_INET (unless net == NONE) and
 * AF_INET6 (only with LOOPBACK and HOST), and the 32-bit compat entry
 * points.  On success fills *ret
 * (ret->filter is malloc'd; free with layer_seccomp_free) and returns 0;
 * -errno otherwise.
 */
int layer_seccomp_build(enum sbx_net net, struct sock_fprog *ret);
void layer_seccomp_free(struct sock_fprog *prog);

/* Load a program built by layer_seccomp_build into the calling process.
 * Needs no_new_privs.  Async-signal-safe.  Returns 0 or -errno. */
int layer_seccomp_load(const struct sock_fprog *prog);

/* ---- capabilities ------------------------------------------------------ */

/*
 * Drop every capability from every set (effective, permitted,
 * inheritable, ambient, bounding) with libcap-ng, then read them back.
 * Returns 0, or -EPERM if any capability survived.  Async-signal-safe in
 * practice (libcap-ng keeps static state and does not allocate here).
 */
int layer_caps_drop_all(void);

/*
 * Set and lock the securebits layer_caps_drop_all sets (NOROOT,
 * NO_CAP_AMBIENT_RAISE, KEEP_CAPS and NO_SETUID_FIXUP off, all locked)
 * while the caller still holds CAP_SETPCAP: as root, the spawner calls it
 * before it empties the bounding set and switches to the run uid, after
 * which layer_caps_drop_all no longer can.  Returns 0 (also when they are
 * already set) or -errno (-EPERM without CAP_SETPCAP).
 * Async-signal-safe.
 */
int layer_caps_lock_securebits(void);

/* Empty the bounding set (needs CAP_SETPCAP): as root, the spawner calls
 * it before switching to the run uid.  Returns 0 or -errno.
 * Async-signal-safe. */
int layer_caps_drop_bounding(void);

/* ---- probing (spctl doctor, daemon.status, mode=required) ------------- */

/*
 * Probe what this kernel and host let sandboxd do, without side effects
 * on the caller (probes run in short-lived children).  Fills *ret; every
 * missing layer gets one actionable sentence in its *_why field.
 * Returns 0 or -errno.  Not async-signal-safe (call in sandboxd only).
 */
int layer_probe_layers(struct sbx_layers *ret);

/* ---- pathname Unix sockets (additive, see docs/sandbox.md) ------------ */

/*
 * Call cb(path, data) for every pathname Unix socket bound in sandboxd's
 * network namespace that a run could connect to: listening stream and
 * seqpacket sockets and bound datagram sockets (from sock_diag, which
 * sends only those, or /proc/net/unix where the kernel lacks it;
 * abstract and unnamed sockets are skipped, and so are accepted
 * connections, which repeat their listener's name).  Landlock cannot
 * refuse connect() to a pathname socket (up to ABI 7), and a read-only bind
 * does not stop it either, so the mount plan covers each socket outside
 * the writable paths that its hidden directories do not already cover.
 * path is valid during the call only.  A negative return from cb stops
 * the walk and is returned.  Only paths that are absolute and name a
 * socket inode now (lstat) are reported.  Returns 0 or -errno.  Uses
 * stdio (allocates): call in sandboxd before fork, never in the child.
 */
int layer_unix_sockets(int (*cb)(const char *path, void *data), void *data);

#endif
