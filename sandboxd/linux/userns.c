/*
 * The user namespaces sandboxd makes for runs as root (userns.h), each by
 * a short-lived child: the idmapped mounts' and the runs' own.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "spawn.h"
#include "userns.h"

static int write_id_maps(pid_t pid, const char *uid_map, const char *gid_map)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	if ((r = spawn_write_file(path, uid_map)) < 0)
		return r;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	return spawn_write_file(path, gid_map);
}

/* What make_userns's child is given: the pipe it says on that its
 * namespace is made (ready), the pipe it then waits on (go), and for a
 * namespace owned by another uid, that uid and gid. */
struct userns_req {
	int go[2], ready[2];
	bool owned;
	uid_t uid;
	gid_t gid;
};

/* make_userns's child.  Owned: takes the owner's uid and gid as its
 * effective ids, keeping its capabilities (SECBIT_NO_SETUID_FIXUP),
 * with no limit of processes of its own, or its hard limit without
 * CAP_SYS_RESOURCE (that is the namespace's ceiling over the count of
 * all its processes), makes the namespace and
 * reports 0 or the errno.  Then it waits, doing nothing, until the
 * parent has what it needs (EOF on go).  Under SPAWN_SHARED_VM it shares
 * sandboxd's memory, on a small stack of its own: system calls only. */
static int userns_child(void *arg)
{
	const struct userns_req *q = arg;
	const struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
	struct rlimit rl;
	int err = 0;
	char c;

	close(q->go[1]);
	close(q->ready[0]);
	if (q->owned) {
		/* Without CAP_SYS_RESOURCE (a container), the hard limit. */
		if (setrlimit(RLIMIT_NPROC, &inf) < 0 &&
		    getrlimit(RLIMIT_NPROC, &rl) == 0) {
			rl.rlim_cur = rl.rlim_max;
			(void)setrlimit(RLIMIT_NPROC, &rl);
		}
		if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) <
			0 ||
		    syscall(SYS_setresgid, -1, q->gid, -1) < 0 ||
		    syscall(SYS_setresuid, -1, q->uid, -1) < 0 ||
		    unshare(CLONE_NEWUSER) < 0)
			err = errno;
	}
	if (write(q->ready[1], &err, sizeof(err)) != sizeof(err) || err)
		_exit(1);
	close(q->ready[1]);
	while (read(q->go[0], &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

/* Waits for the child's report (userns_child) on the read end of the
 * ready pipe.  Returns 0 or -errno. */
static int userns_ready(int ready_r)
{
	ssize_t n;
	int err;

	do {
		n = read(ready_r, &err, sizeof(err));
	} while (n < 0 && errno == EINTR);
	if (n != sizeof(err))
		return n < 0 ? -errno : -ECHILD;
	return err ? -err : 0;
}

/* A user namespace with the given uid and gid maps, made by a short-lived
 * child of sandboxd and kept open as *ret_fd; its owner is sandboxd's
 * uid, or with owner, uid and gid.  Returns 0 or -errno.  A fork would
 * copy sandboxd's page tables: 0.9 ms here, against 0.1 ms for a child
 * that shares its memory (bench/README.md). */
static int make_userns(const char *umap, const char *gmap, bool owned,
		       uid_t uid, gid_t gid, int *ret_fd)
{
	struct userns_req q = {.go = {-1, -1},
			       .ready = {-1, -1},
			       .owned = owned,
			       .uid = uid,
			       .gid = gid};
	unsigned long flags = (owned ? 0 : CLONE_NEWUSER) | SIGCHLD;
	char path[64];
	int fd = -1, r;
	pid_t pid;

	if (pipe2(q.go, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(q.ready, O_CLOEXEC) < 0) {
		r = -errno;
		close(q.go[0]);
		close(q.go[1]);
		return r;
	}
#if SPAWN_SHARED_VM
	static char stack[16384] __attribute__((aligned(16)));

	pid = clone(userns_child, stack + sizeof(stack),
		    (int)(flags | CLONE_VM), &q);
#else
	pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid == 0)
		userns_child(&q);
#endif
	/* q is the child's too (CLONE_VM): read here, never written. */
	r = pid < 0 ? -errno : 0;
	close(q.go[0]);
	close(q.ready[1]);
	if (r == 0)
		r = userns_ready(q.ready[0]);
	if (r == 0)
		r = write_id_maps(pid, umap, gmap);
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
	}
	close(q.go[1]);
	close(q.ready[0]);
	while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return r;
	*ret_fd = fd;
	return 0;
}

/*
 * A user namespace for MOUNT_ATTR_IDMAP in which the operator's uid (the
 * owner of the workspace on disk) is the run's uid: through such a mount
 * the run sees its workspace as its own, and what it creates is stored
 * as the operator's.  Made once per uid pair and kept open.
 */
int userns_idmap(struct spawn_ctx *ctx, uid_t uid, gid_t gid, int *ret_fd)
{
	char umap[64], gmap[64];
	int fd, r;

	for (size_t i = 0; i < ctx->nidmap; i++) {
		if (ctx->idmap[i].uid == uid && ctx->idmap[i].gid == gid) {
			*ret_fd = ctx->idmap[i].fd;
			return 0;
		}
	}
	snprintf(umap, sizeof(umap), "%u %u 1\n", ctx->uid, uid);
	snprintf(gmap, sizeof(gmap), "%u %u 1\n", ctx->gid, gid);
	if ((r = make_userns(umap, gmap, false, 0, 0, &fd)) < 0)
		return r;
	if (ctx->nidmap == SPAWN_IDMAP_CACHE) {
		close(ctx->idmap[0].fd);
		memmove(&ctx->idmap[0], &ctx->idmap[1],
			sizeof(ctx->idmap[0]) * (SPAWN_IDMAP_CACHE - 1));
		ctx->nidmap--;
	}
	ctx->idmap[ctx->nidmap].uid = uid;
	ctx->idmap[ctx->nidmap].gid = gid;
	ctx->idmap[ctx->nidmap].fd = fd;
	ctx->nidmap++;
	ctx->idmap_gen++;
	*ret_fd = fd;
	return 0;
}

/*
 * Root: the user namespace of a run's command, one per run.  Its maps are
 * the host's own (every id is itself), so that the command's files,
 * owners and permissions are exactly what they would be outside it; what
 * it changes is the accounting of RLIMIT_NPROC, which the kernel keeps
 * per user namespace and uid.  In the host's namespace every run of
 * uid 65534 would share one count with the others and with every other
 * process of that uid on the host: one run's fork bomb, or a host
 * service running as nobody, would leave the next run unable to exec.
 * Its owner is the run uid, not root: what the kernel counts per uid
 * through the levels of namespaces (inotify instances, 128 by default,
 * and the like) is charged to the run uid in the host's namespace, as
 * it was before, never to root's, which a run could use up for every
 * root daemon on the host.  Made ahead, for the last run's uid, while
 * sandboxd is idle after a run (spawn_spare), and taken by the next run;
 * made on the spot when there is none or its uid differs.
 */
static const char run_userns_map[] = "0 0 4294967295\n";

int userns_run(struct spawn_ctx *ctx, uid_t uid, gid_t gid, int *ret_fd)
{
	int fd = ctx->run_userns_fd;

	ctx->run_userns_fd = -1;
	if (fd >= 0 && ctx->run_userns_uid == uid &&
	    ctx->run_userns_gid == gid) {
		*ret_fd = fd;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	ctx->run_userns_uid = uid;
	ctx->run_userns_gid = gid;
	ctx->run_userns_set = true;
	return make_userns(run_userns_map, run_userns_map, true, uid, gid,
			   ret_fd);
}

/* Root: the next run's user namespace (userns_run), made ahead. */
void userns_run_ahead(struct spawn_ctx *ctx)
{
	if (ctx->root && ctx->run_userns_set && ctx->run_userns_fd < 0)
		(void)make_userns(run_userns_map, run_userns_map, true,
				  ctx->run_userns_uid, ctx->run_userns_gid,
				  &ctx->run_userns_fd);
}
