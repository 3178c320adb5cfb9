/*
 * The spare (sandboxd/linux/spawn.h, docs/sandbox.md): the next run's
 * namespaces, pid 1 and command process, made while sandboxd is idle.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "child.h"
#include "spare.h"
#include "spawn.h"

#if SPAWN_SHARED_VM
/* The namespaces every spare is cloned into: all of a run's, the
 * network's included (a run on the host's network clones anew). */
static unsigned long spare_flags(const struct spawn_ctx *ctx)
{
	unsigned long f = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			  CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWNET;

	return ctx->root ? f : f | CLONE_NEWUSER;
}

/* Have sandboxd's mounts changed since the last call?  A spare's mount
 * namespace is a copy of sandboxd's from its clone: one made before a
 * change (a file system mounted where a workspace lives) would not see
 * it.  Mount propagation usually brings it over, but not on a host
 * whose mounts are private.  Errors count as a change. */
static bool mounts_changed(struct spawn_ctx *ctx)
{
	struct pollfd p = {ctx->mounts_fd, POLLPRI, 0};

	if (ctx->mounts_fd < 0)
		return true;
	if (poll(&p, 1, 0) < 0)
		return true;
	return p.revents & (POLLPRI | POLLERR | POLLNVAL);
}

#endif

/* The hot spare's part of the spare, gone with it. */
static void hot_forget(struct spawn_ctx *ctx)
{
	spawn_hot_free(ctx->hot);
	ctx->hot = NULL;
	ctx->hot_args = NULL;
	if (ctx->hot_mounts_fd >= 0)
		close(ctx->hot_mounts_fd);
	ctx->hot_mounts_fd = -1;
}

void spawn_spare_drop(struct spawn_ctx *ctx)
{
	if (ctx->spare_pid <= 0)
		return;
	/* Its init's death ends its pid namespace, the command's process
	 * with it, before the wait returns: nothing of the spare runs on
	 * in sandboxd's memory after this. */
	kill(ctx->spare_pid, SIGKILL);
	while (waitpid(ctx->spare_pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	close(ctx->spare_sock);
	close(ctx->spare_status);
	ctx->spare_sock = ctx->spare_status = -1;
	ctx->spare_pid = 0;
	ctx->spare_said_ready = false;
	hot_forget(ctx);
}

void spare_make(struct spawn_ctx *ctx)
{
#if SPAWN_SHARED_VM
	struct child_spare *sp = ctx->spare_cfg;
	int sv[2] = {-1, -1}, st[2] = {-1, -1}, ready[2] = {-1, -1};
	pid_t pid = -1;

	if (ctx->spare_pid > 0 || !ctx->probed || !ctx->layers.run_init ||
	    (!ctx->root && !ctx->layers.userns) || !ctx->spare_stack ||
	    !ctx->spare_cmd_stack || !sp || ctx->init_fd < 0)
		return;
	if (ctx->mounts_fd < 0)
		ctx->mounts_fd =
		    open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (ctx->mounts_fd < 0)
		return;
	(void)mounts_changed(ctx); /* from here on, a change is seen */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(st, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0)
		goto out;
	memset(sp, 0, sizeof(*sp));
	sp->sock = sv[1];
	sp->status_w = st[1];
	sp->ready[0] = ready[0];
	sp->ready[1] = ready[1];
	sp->cmd_stack = ctx->spare_cmd_stack;
	sp->keep[sp->nkeep++] = ctx->init_fd;
	for (size_t i = 0; i < ctx->nidmap && sp->nkeep < CHILD_SPARE_KEEP_MAX;
	     i++)
		sp->keep[sp->nkeep++] = ctx->idmap[i].fd;
	sp->fixed = ctx->fixed_plan.ops ? &ctx->fixed_plan : NULL;
	if (!ctx->root) {
		snprintf(sp->uid_map, sizeof(sp->uid_map), "%u %u 1\n",
			 ctx->uid, ctx->uid);
		snprintf(sp->gid_map, sizeof(sp->gid_map), "%u %u 1\n",
			 ctx->gid, ctx->gid);
	}
	/* Shares sandboxd's memory like a run's init, but sandboxd goes on:
	 * until its exec the spare's pid 1, and until its run arrives its
	 * command's process, touch only their own stacks (and sp, which
	 * stays as it is while the spare lives). */
	/* Only the user and pid namespaces at the clone (a pid namespace
	 * must be entered by its pid 1's clone): the spare creates the others
	 * itself (unshare_flags), on its own time instead of sandboxd's,
	 * the network namespace's 0.26 ms among them. */
	sp->unshare_flags = spare_flags(ctx) & ~(CLONE_NEWUSER | CLONE_NEWPID);
	pid = clone(child_spare_entry, ctx->spare_stack,
		    (int)((spare_flags(ctx) & (CLONE_NEWUSER | CLONE_NEWPID)) |
			  CLONE_VM | SIGCHLD),
		    sp);
	if (pid > 0) {
		ctx->spare_pid = pid;
		ctx->spare_sock = steal_fd(sv[0]);
		ctx->spare_status = steal_fd(st[0]);
		ctx->spare_idmap_gen = ctx->idmap_gen;
		ctx->spare_said_ready = false;
	}
out:
	/* Theirs, or nobody's. */
	for (int i = 0; i < 2; i++) {
		if (sv[i] >= 0)
			close(sv[i]);
		if (st[i] >= 0)
			close(st[i]);
		if (ready[i] >= 0)
			close(ready[i]);
	}
#else
	(void)ctx;
#endif
}

#if SPAWN_SHARED_VM
/* Waits for the spare's byte that says its namespaces and the plan's
 * head are made and its pid 1 is sandboxd-init (usually long there);
 * false when it failed and exited. */
static bool spare_ready(struct spawn_ctx *ctx)
{
	char c = 0;
	ssize_t n;

	if (ctx->spare_said_ready)
		return true;
	do {
		n = recv(ctx->spare_sock, &c, 1, 0);
	} while (n < 0 && errno == EINTR);
	return n == 1 && c == 'r';
}

/* Hands the run in a to the spare: the address of a and the run's
 * descriptors in one message (child.h).  Returns 0 or -errno. */
static int spare_send(struct spawn_ctx *ctx, const struct child_args *a,
		      enum child_spare_kind kind)
{
	union {
		char buf[CMSG_SPACE(CHILD_SPARE_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	int fds[CHILD_SPARE_FDS_MAX], n = 0;
	struct child_spare_msg m = {a, kind};
	struct iovec iov = {&m, sizeof(m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	if (kind == CHILD_SPARE_RUN) {
		fds[n++] = a->fd_out;
		fds[n++] = a->fd_err;
		fds[n++] = a->fd_report;
		if (a->fd_in >= 0)
			fds[n++] = a->fd_in;
		if (a->fd_broker >= 0)
			fds[n++] = a->fd_broker;
	}
	if (a->fd_userns >= 0)
		fds[n++] = a->fd_userns;
	if (n == 0) {
		if (sendmsg(ctx->spare_sock, &mh, MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(m))
			return -errno;
		return 0;
	}
	memset(&u, 0, sizeof(u));
	mh.msg_control = u.buf;
	mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	if (sendmsg(ctx->spare_sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -errno;
	return 0;
}

/* What a run's setup looks at on the host beyond its args: the files
 * behind its mount plan (mountplan_fingerprint) and its directory. */
static uint64_t hot_fingerprint(const struct child_args *a)
{
	uint64_t h = mountplan_fingerprint(a->plan);
	struct stat st;

	if (stat(a->cwd, &st) < 0)
		return h * 0x100000001b3ull ^ (uint64_t)errno;
	h = (h ^ (uint64_t)st.st_dev) * 0x100000001b3ull;
	return (h ^ (uint64_t)st.st_ino) * 0x100000001b3ull;
}

/* Has a mount of the hot spare's namespace changed since its HEAT?  A
 * file or directory it covered that the host removed takes that mount
 * away (and its inode number may come back on a new one).  Errors count
 * as a change. */
static bool hot_mounts_changed(struct spawn_ctx *ctx)
{
	struct pollfd p = {ctx->hot_mounts_fd, POLLPRI, 0};

	if (ctx->hot_mounts_fd < 0 || poll(&p, 1, 0) < 0)
		return true;
	return p.revents & (POLLPRI | POLLERR | POLLNVAL);
}

/* spare.h */
int spare_heat(struct spawn_ctx *ctx, struct spawn_hot *hot,
	       const struct child_args *a)
{
	struct pollfd p = {ctx->spare_sock, POLLIN, 0};
	char path[64], c = 0;
	uint64_t fp;
	ssize_t n;
	int r, fd;

	if (ctx->spare_pid <= 0 || ctx->hot || !a->plan ||
	    !ctx->spare_cfg->fixed ||
	    !mountplan_same_head(a->plan, ctx->spare_cfg->fixed))
		return -1;
	if (mounts_changed(ctx) || ctx->spare_idmap_gen != ctx->idmap_gen ||
	    !spare_ready(ctx))
		goto drop;
	ctx->spare_said_ready = true;
	fp = hot_fingerprint(a);
	if (spare_send(ctx, a, CHILD_SPARE_HEAT) < 0)
		goto drop;
	/* The spare's command process sets itself up in sandboxd's memory:
	 * nothing else here until its answer (child.h). */
	do {
		r = poll(&p, 1, SPARE_HEAT_TIMEOUT_MS);
	} while (r < 0 && errno == EINTR);
	if (r != 1)
		goto drop;
	do {
		n = recv(ctx->spare_sock, &c, 1, 0);
	} while (n < 0 && errno == EINTR);
	if (n != 1 || c != 'h')
		goto drop;
	/* The same files as before it began: none was swapped under it. */
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)ctx->spare_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto drop;
	ctx->hot_mounts_fd = fd;
	if (hot_mounts_changed(ctx) || hot_fingerprint(a) != fp) {
		ctx->hot_mounts_fd = -1;
		close(fd);
		goto drop;
	}
	ctx->hot = hot;
	ctx->hot_args = a;
	ctx->hot_fp = fp;
	return 0;
drop:
	spawn_spare_drop(ctx);
	return -1;
}

/* Whether the hot spare was set up as run a would be: the same args but
 * for the command, its environment and descriptors, the same plan over
 * the same files, nothing of its mounts gone since. */
static bool hot_fits(struct spawn_ctx *ctx, const struct child_args *a)
{
	const struct child_args *h = ctx->hot_args;

	if (!a->plan || !a->landlock || !h->landlock || a->best_effort ||
	    a->fd_broker >= 0 || a->root != h->root ||
	    a->run_uid != h->run_uid || a->run_gid != h->run_gid ||
	    a->loopback != h->loopback || a->filter != h->filter ||
	    a->landlock->net != h->landlock->net ||
	    a->landlock->broker_port != h->landlock->broker_port ||
	    a->landlock->scope != h->landlock->scope ||
	    strcmp(a->cwd, h->cwd) != 0 ||
	    memcmp(a->rl_res, h->rl_res, sizeof(a->rl_res)) != 0 ||
	    memcmp(a->rl_val, h->rl_val, sizeof(a->rl_val)) != 0)
		return false;
	struct mountplan p = *a->plan;

	/* The hot plan's check decides from its list only: so must this
	 * run's, for the two to be the same. */
	p.links_list_only = h->plan->links_list_only;
	return mountplan_same(&p, h->plan) && !hot_mounts_changed(ctx) &&
	       hot_fingerprint(a) == ctx->hot_fp;
}

/* spare.h */
pid_t spare_take(struct spawn_ctx *ctx, const struct child_args *a,
		 unsigned long flags, int *report_w, int *status_r,
		 int report_r)
{
	struct pollfd p = {report_r, 0, 0};
	pid_t pid = ctx->spare_pid;

	if (pid <= 0)
		return 0;
	if ((flags & spare_flags(ctx)) != spare_flags(ctx)) {
		/* A hot spare serves only the run it was set up for. */
		if (ctx->hot)
			spawn_spare_drop(ctx);
		return 0;
	}
	/* The spare applied the fixed head of the mount plan already; a
	 * plan that began otherwise would not get what it asks for.  A hot
	 * one applied all of it, and confined itself, for one run. */
	if (mounts_changed(ctx) || ctx->spare_idmap_gen != ctx->idmap_gen ||
	    !a->plan ||
	    (ctx->spare_cfg->fixed &&
	     !mountplan_same_head(a->plan, ctx->spare_cfg->fixed)) ||
	    (ctx->hot && !hot_fits(ctx, a)) || !spare_ready(ctx) ||
	    spare_send(ctx, a, CHILD_SPARE_RUN) < 0) {
		spawn_spare_drop(ctx);
		return 0;
	}
	hot_forget(ctx);
	close(ctx->spare_sock);
	ctx->spare_sock = -1;
	ctx->spare_pid = 0;
	close(*report_w);
	*report_w = -1;
	*status_r = ctx->spare_status;
	ctx->spare_status = -1;
	/* POLLHUP only: the records stay for the loop to read. */
	while (!(p.revents & (POLLHUP | POLLERR)))
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			break;
	return pid;
}
#endif
