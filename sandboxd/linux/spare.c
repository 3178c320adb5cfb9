/*
 * The spares (sandboxd/linux/spawn.h, docs/sandbox.md): the next runs'
 * namespaces, pid 1 and command process, made while sandboxd is idle;
 * one cold, for any run, and the others hot, each set up for a run like
 * one before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "child.h"
#include "spare.h"
#include "spawn.h"

/* The hot part of a spare, gone with it or with its use. */
static void hot_forget(struct spare_slot *sl)
{
	spawn_hot_free(sl->hot);
	sl->hot = NULL;
	sl->hot_args = NULL;
	if (sl->hot_mounts_fd >= 0)
		close(sl->hot_mounts_fd);
	sl->hot_mounts_fd = -1;
}

/* Kills and reaps one spare.  Its init's death ends its pid namespace,
 * the command's process with it, before the wait returns: nothing of the
 * spare runs on in sandboxd's memory after this. */
static void slot_drop(struct spare_slot *sl)
{
	if (sl->pid <= 0)
		return;
	kill(sl->pid, SIGKILL);
	while (waitpid(sl->pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	close(sl->sock);
	close(sl->status);
	sl->sock = sl->status = -1;
	sl->pid = 0;
	sl->said_ready = sl->to_heat = false;
	hot_forget(sl);
}

void spawn_spare_drop(struct spawn_ctx *ctx)
{
	for (size_t i = 0; i < SPAWN_SPARES; i++)
		slot_drop(&ctx->spares[i]);
}

#if SPAWN_SHARED_VM
/* The namespaces every spare is cloned into: all of a run's, the
 * network's included (a run on the host's network clones anew). */
static unsigned long spare_flags(const struct spawn_ctx *ctx)
{
	unsigned long f = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			  CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWNET;

	return ctx->root ? f : f | CLONE_NEWUSER;
}

/* How many times sandboxd's mounts have changed, as far as known now.  A
 * spare's mount namespace is a copy of sandboxd's from its clone: one
 * made before a change (a file system mounted where a workspace lives)
 * would not see it.  Mount propagation usually brings it over, but not
 * on a host whose mounts are private.  An error counts as a change. */
static unsigned int mounts_gen(struct spawn_ctx *ctx)
{
	struct pollfd p = {ctx->mounts_fd, POLLPRI, 0};

	if (ctx->mounts_fd < 0 || poll(&p, 1, 0) < 0 ||
	    (p.revents & (POLLPRI | POLLERR | POLLNVAL)))
		ctx->mounts_gen++;
	return ctx->mounts_gen;
}

/* Whether the spare in sl may still serve a run: made since sandboxd's
 * mounts last changed (gen: mounts_gen, polled once by the caller for
 * all the slots it looks at), holding every idmap user namespace made
 * since. */
static bool slot_current(const struct spawn_ctx *ctx,
			 const struct spare_slot *sl, unsigned int gen)
{
	return sl->pid > 0 && sl->mounts_gen == gen &&
	       sl->idmap_gen == ctx->idmap_gen;
}

/* Clones a spare into sl, empty.  Returns 0 or -1. */
static int slot_make(struct spawn_ctx *ctx, struct spare_slot *sl)
{
	int sv[2] = {-1, -1}, st[2] = {-1, -1}, ready[2] = {-1, -1};
	struct child_spare *sp;
	pid_t pid = -1;

	if (!sl->cfg)
		sl->cfg = calloc(1, sizeof(*sl->cfg));
	if (!sl->stack)
		sl->stack = spawn_stack_map();
	if (!sl->cmd_stack)
		sl->cmd_stack = spawn_stack_map();
	if (!(sp = sl->cfg) || !sl->stack || !sl->cmd_stack)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(st, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0)
		goto out;
	memset(sp, 0, sizeof(*sp));
	sp->sock = sv[1];
	sp->status_w = st[1];
	sp->ready[0] = ready[0];
	sp->ready[1] = ready[1];
	sp->cmd_stack = sl->cmd_stack;
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
	pid = clone(child_spare_entry, sl->stack,
		    (int)((spare_flags(ctx) & (CLONE_NEWUSER | CLONE_NEWPID)) |
			  CLONE_VM | SIGCHLD),
		    sp);
	if (pid > 0) {
		sl->pid = pid;
		sl->sock = steal_fd(sv[0]);
		sl->status = steal_fd(st[0]);
		sl->idmap_gen = ctx->idmap_gen;
		sl->mounts_gen = ctx->mounts_gen;
		sl->said_ready = sl->to_heat = false;
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
	return pid > 0 ? 0 : -1;
}

/* A slot for a new spare: an empty one, else the one heated longest ago
 * (dropped).  NULL: none can be freed. */
static struct spare_slot *slot_free(struct spawn_ctx *ctx)
{
	struct spare_slot *old = NULL;

	for (size_t i = 0; i < SPAWN_SPARES; i++) {
		struct spare_slot *sl = &ctx->spares[i];

		if (sl->pid <= 0)
			return sl;
		if (sl->hot && (!old || sl->heated_ns < old->heated_ns))
			old = sl;
	}
	if (old)
		slot_drop(old);
	return old;
}
#endif

void spare_make(struct spawn_ctx *ctx, bool heat)
{
#if SPAWN_SHARED_VM
	struct spare_slot *sl;
	bool cold = false, heating = false;
	unsigned int gen;

	if (!ctx->probed || !ctx->layers.run_init ||
	    (!ctx->root && !ctx->layers.userns) || ctx->init_fd < 0)
		return;
	if (ctx->mounts_fd < 0) {
		ctx->mounts_fd =
		    open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
		if (ctx->mounts_fd < 0)
			return;
	}
	/* Those made before a change are of no use now. */
	gen = mounts_gen(ctx);
	for (size_t i = 0; i < SPAWN_SPARES; i++) {
		sl = &ctx->spares[i];
		if (sl->pid > 0 && !slot_current(ctx, sl, gen))
			slot_drop(sl);
		cold |= sl->pid > 0 && !sl->hot && !sl->to_heat;
		heating |= sl->pid > 0 && sl->to_heat;
	}
	if (!cold && (sl = slot_free(ctx)))
		(void)slot_make(ctx, sl);
	if (heat && !heating && (sl = slot_free(ctx)) &&
	    slot_make(ctx, sl) == 0)
		sl->to_heat = true;
#else
	(void)ctx;
	(void)heat;
#endif
}

#if SPAWN_SHARED_VM
/* Waits for the spare's byte that says its namespaces and the plan's
 * head are made and its pid 1 is sandboxd-init (usually long there);
 * false when it failed and exited. */
static bool slot_ready(struct spare_slot *sl)
{
	struct pollfd p = {sl->sock, POLLIN, 0};
	char c = 0;
	ssize_t n;
	int r;

	if (sl->said_ready)
		return true;
	/* Bounded: a spare that never answers must not hold sandboxd, and
	 * every run after it, for good; the run is cloned anew instead. */
	do {
		r = poll(&p, 1, SPARE_READY_TIMEOUT_MS);
	} while (r < 0 && errno == EINTR);
	if (r == 0) {
		fprintf(stderr,
			"sandboxd: a spare did not say it was ready within "
			"%d ms; it is dropped and the run cloned anew\n",
			SPARE_READY_TIMEOUT_MS);
		return false;
	}
	do {
		n = recv(sl->sock, &c, 1, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	sl->said_ready = n == 1 && c == 'r';
	return sl->said_ready;
}

/* Hands a to the spare in sl: the address of a and, for a run, its
 * descriptors, in one message (child.h).  Returns 0 or -errno. */
static int slot_send(struct spare_slot *sl, const struct child_args *a,
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
	if (n > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	}
	if (sendmsg(sl->sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -errno;
	return 0;
}

/* What a run's setup looks at on the host beyond its args: the files
 * behind its mount plan (mountplan_fingerprint) and its directory. */
static uint64_t hot_fingerprint(const struct child_args *a)
{
	return mountplan_fingerprint_add(mountplan_fingerprint(a->plan),
					 a->cwd);
}

/* Has a mount of the hot spare's namespace changed since its HEAT?  A
 * file or directory it covered that the host removed takes that mount
 * away (and its inode number may come back on a new one).  An error
 * counts as a change. */
static bool hot_mounts_changed(const struct spare_slot *sl)
{
	struct pollfd p = {sl->hot_mounts_fd, POLLPRI, 0};

	if (sl->hot_mounts_fd < 0 || poll(&p, 1, 0) < 0)
		return true;
	return p.revents & (POLLPRI | POLLERR | POLLNVAL);
}
#endif

int spare_to_heat(const struct spawn_ctx *ctx)
{
	for (size_t i = 0; SPAWN_SHARED_VM && i < SPAWN_SPARES; i++)
		if (ctx->spares[i].pid > 0 && ctx->spares[i].to_heat)
			return (int)i;
	return -1;
}

#if SPAWN_SHARED_VM
/* spare.h */
void spare_heat_drop(struct spawn_ctx *ctx)
{
	int i = spare_to_heat(ctx);

	if (i >= 0)
		slot_drop(&ctx->spares[i]);
}

/* spare.h */
int spare_heat(struct spawn_ctx *ctx, struct spawn_hot *hot,
	       const struct child_args *a)
{
	int i = spare_to_heat(ctx), r, fd;
	struct spare_slot *sl = i < 0 ? NULL : &ctx->spares[i];
	struct pollfd p = {sl ? sl->sock : -1, POLLIN, 0};
	char path[64], c = 0;
	uint64_t fp;
	ssize_t n;

	if (!sl)
		return -1;
	sl->to_heat = false;
	if (!a->plan || !sl->cfg->fixed ||
	    !mountplan_same_head(a->plan, sl->cfg->fixed) ||
	    !slot_current(ctx, sl, mounts_gen(ctx)) || !slot_ready(sl))
		goto drop;
	fp = hot_fingerprint(a);
	if (slot_send(sl, a, CHILD_SPARE_HEAT) < 0)
		goto drop;
	/* The spare's command process sets itself up in sandboxd's memory:
	 * nothing else here until its answer (child.h). */
	do {
		r = poll(&p, 1, SPARE_HEAT_TIMEOUT_MS);
	} while (r < 0 && errno == EINTR);
	if (r != 1)
		goto drop;
	do {
		n = recv(sl->sock, &c, 1, 0);
	} while (n < 0 && errno == EINTR);
	if (n != 1 || c != 'h')
		goto drop;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)sl->pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		goto drop;
	sl->hot_mounts_fd = fd;
	/* The same files as before it began: none was swapped under it. */
	if (hot_mounts_changed(sl) || hot_fingerprint(a) != fp)
		goto drop;
	sl->hot = hot;
	sl->hot_args = a;
	sl->hot_fp = fp;
	sl->heated_ns = spawn_now_ns();
	return 0;
drop:
	slot_drop(sl);
	return -1;
}

/* Whether the hot spare in sl was set up as run a would be: the same
 * args but for the command, its environment and descriptors, the same
 * plan over the same files, nothing of its mounts gone since (else it
 * is dropped: it can serve no run). */
static bool hot_fits(struct spare_slot *sl, const struct child_args *a)
{
	const struct child_args *h = sl->hot_args;

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
	if (!mountplan_same(&p, h->plan))
		return false;
	if (hot_mounts_changed(sl) || hot_fingerprint(a) != sl->hot_fp) {
		slot_drop(sl);
		return false;
	}
	return true;
}

/* Hands the run in a to the spare in sl and waits until its command is
 * past its exec (spare.h, spare_take).  Returns its init's pid, or 0
 * when the spare is gone (dropped). */
static pid_t slot_take(struct spare_slot *sl, const struct child_args *a,
		       int *report_w, int *status_r, int report_r)
{
	struct pollfd p = {report_r, 0, 0};
	pid_t pid = sl->pid;

	if (!slot_ready(sl) || slot_send(sl, a, CHILD_SPARE_RUN) < 0) {
		slot_drop(sl);
		return 0;
	}
	hot_forget(sl);
	close(sl->sock);
	sl->sock = -1;
	sl->pid = 0;
	sl->said_ready = false;
	close(*report_w);
	*report_w = -1;
	*status_r = sl->status;
	sl->status = -1;
	/* POLLHUP only: the records stay for the loop to read. */
	while (!(p.revents & (POLLHUP | POLLERR)))
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			break;
	return pid;
}

/* spare.h */
pid_t spare_take(struct spawn_ctx *ctx, const struct child_args *a,
		 unsigned long flags, bool hot, int *report_w, int *status_r,
		 int report_r)
{
	unsigned int gen;

	if ((flags & spare_flags(ctx)) != spare_flags(ctx) || !a->plan)
		return 0;
	gen = mounts_gen(ctx);
	for (size_t i = 0; i < SPAWN_SPARES; i++) {
		struct spare_slot *sl = &ctx->spares[i];

		/* One still to heat is cold until then. */
		if (sl->pid <= 0 || !sl->hot != !hot)
			continue;
		if (!slot_current(ctx, sl, gen)) {
			slot_drop(sl);
			continue;
		}
		/* A cold spare applied the fixed head of the mount plan; a
		 * plan that began otherwise would not get what it asks for.
		 * A hot one applied all of a plan, and confined itself, for
		 * one run. */
		if (hot ? !hot_fits(sl, a)
			: sl->cfg->fixed &&
			      !mountplan_same_head(a->plan, sl->cfg->fixed))
			continue;
		return slot_take(sl, a, report_w, status_r, report_r);
	}
	return 0;
}
#endif
