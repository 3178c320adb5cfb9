/*
 * Landlock: the second filesystem layer under the mount plan, TCP
 * bind/connect for network modes none and broker, and scoping of abstract Unix sockets
 * and signals to the run.
 *
 * glibc has no wrappers for the three Landlock system calls, and Debian 12's
 * kernel headers stop at ABI 2, so the structures and rights of later ABIs
 * are spelled out here under an SBX_LL_ prefix (values from the kernel's
 * include/uapi/linux/landlock.h; they are ABI and never change).
 *
 * Everything below runs in the child between fork and exec: no malloc, no
 * stdio, only system calls and fixed-size stack data.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandboxd/linux/layers.h"

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

#define SBX_LL_CREATE_RULESET_VERSION (1U << 0)

#define SBX_LL_RULE_PATH_BENEATH 1
#define SBX_LL_RULE_NET_PORT 2 /* ABI 4 */

/* Filesystem rights (ABI 1 unless noted). */
#define SBX_LL_FS_EXECUTE (1ULL << 0)
#define SBX_LL_FS_WRITE_FILE (1ULL << 1)
#define SBX_LL_FS_READ_FILE (1ULL << 2)
#define SBX_LL_FS_READ_DIR (1ULL << 3)
#define SBX_LL_FS_REMOVE_DIR (1ULL << 4)
#define SBX_LL_FS_REMOVE_FILE (1ULL << 5)
#define SBX_LL_FS_MAKE_CHAR (1ULL << 6)
#define SBX_LL_FS_MAKE_DIR (1ULL << 7)
#define SBX_LL_FS_MAKE_REG (1ULL << 8)
#define SBX_LL_FS_MAKE_SOCK (1ULL << 9)
#define SBX_LL_FS_MAKE_FIFO (1ULL << 10)
#define SBX_LL_FS_MAKE_BLOCK (1ULL << 11)
#define SBX_LL_FS_MAKE_SYM (1ULL << 12)
#define SBX_LL_FS_REFER (1ULL << 13)	 /* ABI 2, Linux 5.19 */
#define SBX_LL_FS_TRUNCATE (1ULL << 14)	 /* ABI 3, Linux 6.2 */
#define SBX_LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5, Linux 6.10 */

/* Network rights (ABI 4, Linux 6.7). */
#define SBX_LL_NET_BIND_TCP (1ULL << 0)
#define SBX_LL_NET_CONNECT_TCP (1ULL << 1)

/* Scopes (ABI 6, Linux 6.12). */
#define SBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SBX_LL_SCOPE_SIGNAL (1ULL << 1)

/* The newest ABI whose rights this file knows.  A newer kernel is used at
 * this level: rights we do not name are not handled (so not denied), which
 * is what any program written for ABI 7 gets. */
#define SBX_LL_ABI_KNOWN 7

#define SBX_LL_FS_ABI1                                                         \
	(SBX_LL_FS_EXECUTE | SBX_LL_FS_WRITE_FILE | SBX_LL_FS_READ_FILE |      \
	 SBX_LL_FS_READ_DIR | SBX_LL_FS_REMOVE_DIR | SBX_LL_FS_REMOVE_FILE |   \
	 SBX_LL_FS_MAKE_CHAR | SBX_LL_FS_MAKE_DIR | SBX_LL_FS_MAKE_REG |       \
	 SBX_LL_FS_MAKE_SOCK | SBX_LL_FS_MAKE_FIFO | SBX_LL_FS_MAKE_BLOCK |    \
	 SBX_LL_FS_MAKE_SYM)

/* The only rights a rule on a non-directory may carry; the kernel refuses
 * a rule on a file that names directory rights (EINVAL). */
#define SBX_LL_FS_FILE_RIGHTS                                                  \
	(SBX_LL_FS_EXECUTE | SBX_LL_FS_WRITE_FILE | SBX_LL_FS_READ_FILE |      \
	 SBX_LL_FS_TRUNCATE | SBX_LL_FS_IOCTL_DEV)

/*
 * Read paths: read, list and execute.  Not IOCTL_DEV: a device opened from
 * a read-only path (a terminal, a disk) keeps only the few generic ioctls
 * Landlock always allows; the devices a run writes to (/dev/null, a pty)
 * belong in the write paths.
 */
#define SBX_LL_FS_READ_RIGHTS                                                  \
	(SBX_LL_FS_EXECUTE | SBX_LL_FS_READ_FILE | SBX_LL_FS_READ_DIR)

struct sbx_ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;	     /* ABI 6 */
};

/* Sizes the kernel expects for each ABI: it refuses non-zero fields it
 * does not know, so an older kernel is given only the prefix it has. */
#define SBX_LL_ATTR_SIZE_V1 8
#define SBX_LL_ATTR_SIZE_V4 16
#define SBX_LL_ATTR_SIZE_V6 24

struct sbx_ll_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};

struct sbx_ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

int layer_landlock_abi(void)
{
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0,
			   SBX_LL_CREATE_RULESET_VERSION);

	if (abi < 0)
		return 0;
	return (int)abi;
}

static uint64_t ll_fs_rights(int abi)
{
	uint64_t r = SBX_LL_FS_ABI1;

	if (abi >= 2)
		r |= SBX_LL_FS_REFER;
	if (abi >= 3)
		r |= SBX_LL_FS_TRUNCATE;
	if (abi >= 5)
		r |= SBX_LL_FS_IOCTL_DEV;
	return r;
}

/* Add one path-beneath rule.  A path that does not exist is skipped (the
 * plan may name optional caches); any other failure is fatal, so a typo or
 * a permission problem never silently narrows into "allowed by default". */
static int ll_add_path(int ruleset, const char *path, uint64_t access)
{
	struct sbx_ll_path_beneath_attr pb;
	struct stat st;
	int fd, r = 0;

	if (!path || path[0] != '/')
		return -EINVAL;
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISDIR(st.st_mode))
		access &= SBX_LL_FS_FILE_RIGHTS;
	pb.allowed_access = access;
	pb.parent_fd = fd;
	if (syscall(__NR_landlock_add_rule, ruleset, SBX_LL_RULE_PATH_BENEATH,
		    &pb, 0) < 0)
		r = -errno;
out:
	close(fd);
	return r;
}

static int ll_add_paths(int ruleset, const char *const *paths, uint64_t access,
			size_t *count)
{
	int r;

	if (!paths)
		return 0;
	for (size_t i = 0; paths[i]; i++) {
		if (++*count > SBX_LANDLOCK_MAX_PATHS)
			return -E2BIG;
		r = ll_add_path(ruleset, paths[i], access);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Whether a run may make FIFOs below write path p: only its own /tmp,
 * /var/tmp and /dev (private_tmp: the mount plan made them for the run),
 * and only when no other write path lies below it (a workspace under
 * /tmp, bound there).  Everywhere else it writes, spd or the operator
 * reads back: a FIFO blocks whoever opens it for reading until a writer
 * comes, and libgit2 opens a .gitignore or .gitattributes it finds so
 * (spd's walk, checkpoint and end of the session would wait forever).
 */
static bool ll_fifo_path(const struct sbx_landlock_plan *plan, const char *p)
{
	size_t n = strlen(p);

	if (!plan->private_tmp ||
	    (strcmp(p, "/tmp") != 0 && strcmp(p, "/var/tmp") != 0 &&
	     strcmp(p, "/dev") != 0))
		return false;
	for (size_t i = 0; plan->write_paths[i]; i++)
		if (strncmp(plan->write_paths[i], p, n) == 0 &&
		    plan->write_paths[i][n] == '/')
			return false;
	return true;
}

static int ll_add_write_paths(int ruleset, const struct sbx_landlock_plan *plan,
			      uint64_t fs, size_t *count)
{
	int r;

	if (!plan->write_paths)
		return 0;
	for (size_t i = 0; plan->write_paths[i]; i++) {
		const char *p = plan->write_paths[i];

		if (++*count > SBX_LANDLOCK_MAX_PATHS)
			return -E2BIG;
		r = ll_add_path(
		    ruleset, p,
		    ll_fifo_path(plan, p) ? fs : fs & ~SBX_LL_FS_MAKE_FIFO);
		if (r < 0)
			return r;
	}
	return 0;
}

int layer_landlock_apply(const struct sbx_landlock_plan *plan)
{
	struct sbx_ll_ruleset_attr attr = {0};
	size_t attr_size = SBX_LL_ATTR_SIZE_V1, count = 0;
	int abi, ruleset, r;
	uint64_t fs;

	if (!plan)
		return -EINVAL;
	abi = layer_landlock_abi();
	if (abi <= 0)
		return -EOPNOTSUPP;
	if (abi > SBX_LL_ABI_KNOWN)
		abi = SBX_LL_ABI_KNOWN;

	fs = ll_fs_rights(abi);
	attr.handled_access_fs = fs;
	if (abi >= 4) {
		attr_size = SBX_LL_ATTR_SIZE_V4;
		/* Mode none: TCP handled and no port rule, so every bind
		 * and connect is denied (a second wall behind seccomp's
		 * socket filter).  Broker: the same but for one rule that
		 * allows connect to the broker's port (below): the run can
		 * neither bind a port of its own nor reach another one.
		 * Loopback and host: not handled, the network namespace is
		 * the bound. */
		if (plan->net == SBX_NET_NONE || plan->net == SBX_NET_BROKER ||
		    plan->net == SBX_NET_PROXY)
			attr.handled_access_net =
			    SBX_LL_NET_BIND_TCP | SBX_LL_NET_CONNECT_TCP;
	}
	if (abi >= 6) {
		attr_size = SBX_LL_ATTR_SIZE_V6;
		if (plan->scope)
			attr.scoped = SBX_LL_SCOPE_ABSTRACT_UNIX_SOCKET |
				      SBX_LL_SCOPE_SIGNAL;
	}

	ruleset =
	    (int)syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset < 0)
		return -errno;
	r = ll_add_paths(ruleset, plan->read_paths, SBX_LL_FS_READ_RIGHTS & fs,
			 &count);
	if (r < 0)
		goto out;
	r = ll_add_write_paths(ruleset, plan, fs, &count);
	if (r < 0)
		goto out;
	if (abi >= 4 &&
	    (plan->net == SBX_NET_BROKER || plan->net == SBX_NET_PROXY)) {
		struct sbx_ll_net_port_attr np = {
		    .allowed_access = SBX_LL_NET_CONNECT_TCP,
		    .port = plan->broker_port,
		};

		if (syscall(__NR_landlock_add_rule, ruleset,
			    SBX_LL_RULE_NET_PORT, &np, 0) < 0) {
			r = -errno;
			goto out;
		}
	}
	if (syscall(__NR_landlock_restrict_self, ruleset, 0) < 0) {
		r = -errno;
		goto out;
	}
	r = abi;
out:
	close(ruleset);
	return r;
}
