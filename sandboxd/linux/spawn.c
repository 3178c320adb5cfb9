/*
 * Starting, watching and ending one sandboxed run
 * (sandboxd/linux/spawn.h): namespaces, the mount plan, Landlock,
 * seccomp, capabilities, the uid switch, the run's init.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <linux/securebits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/envscrub.h"
#include "common/trace.h"
#include "common/util.h"
#include "child.h"
#include "init.h"
#include "mount.h"
#include "spare.h"
#include "spawn.h"
#include "steps.h"
#include "userns.h"

static const char *const layer_names[L__COUNT] = {
    [L_USERNS] = "user namespaces",
    [L_MOUNT] = "mount plan",
    [L_IDMAP] = "idmapped mounts",
    [L_NETNS] = "loopback network",
    [L_LANDLOCK] = "Landlock",
    [L_NNP] = "no_new_privs",
    [L_CAPS] = "capabilities",
    [L_SECCOMP] = "seccomp",
    [L_RLIMIT] = "rlimits",
    [L_UID] = "run uid",
    [L_NPROC] = "process limit", /* the run's own user namespace */
    [L_CWD] = "working directory",
    [L_INIT] = "run init",
    [L_SETUP] = "setup",
};

/* PATH used to find argv[0] when the run's environment has none. */
#define SPAWN_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* Each child's stack while it shares sandboxd's memory: setup is syscalls
 * on small frames, the hard-link walk's recursion included (its buffers
 * are elsewhere).  Below each, a guard page. */
#define SPAWN_STACK (512 * 1024)

uint64_t spawn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* sandboxd-init's image in a sealed memfd: every run's init executes it
 * (init.h).  Returns the descriptor or -errno. */
static int init_memfd(void)
{
	size_t len = (size_t)(sbx_init_elf_end - sbx_init_elf), off = 0;
	unsigned int flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int fd, r;

#ifdef MFD_EXEC
	/* Since Linux 6.3 a memfd is executable only when asked. */
	fd = memfd_create("sandboxd-init", flags | MFD_EXEC);
	if (fd < 0 && errno == EINVAL)
#endif
		fd = memfd_create("sandboxd-init", flags);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, sbx_init_elf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
		off += (size_t)n;
	}
	if (fchmod(fd, 0500) < 0 ||
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		goto fail;
	return fd;
fail:
	r = errno ? -errno : -EIO;
	close(fd);
	return r;
}

/* A stack with a guard page below it; returns its top or NULL. */
char *spawn_stack_map(void)
{
	char *m = mmap(NULL, SPAWN_STACK + 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
		       -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	if (mprotect(m, 4096, PROT_NONE) < 0) {
		munmap(m, SPAWN_STACK + 4096);
		return NULL;
	}
	return m + SPAWN_STACK + 4096;
}

int spawn_ctx_init(struct spawn_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->uid = geteuid();
	ctx->gid = getegid();
	ctx->root = ctx->uid == 0;
	ctx->init_fd = init_memfd();
	ctx->init_stack = spawn_stack_map();
	ctx->cmd_stack = spawn_stack_map();
	ctx->links_scratch = mountplan_scratch_new();
	ctx->mounts_fd = ctx->run_userns_fd = -1;
	for (size_t i = 0; i < SPAWN_SPARES; i++)
		ctx->spares[i].sock = ctx->spares[i].status =
		    ctx->spares[i].hot_mounts_fd = -1;
#if SPAWN_SHARED_VM
	if (mountplan_build_fixed(&ctx->fixed_plan) < 0)
		memset(&ctx->fixed_plan, 0, sizeof(ctx->fixed_plan));
#endif
	return 0;
}

/* Can a run's pid 1 become sandboxd-init?  Executes it once, with no
 * argument (it exits 0 at once), in a child.  Returns 0 or -errno. */
static int probe_run_init(struct spawn_ctx *ctx)
{
	char *argv[] = {(char *)"sandboxd-init", NULL}, *envp[] = {NULL};
	int p[2], err = 0, st;
	pid_t pid;

	if (ctx->init_fd < 0)
		return ctx->init_fd;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid == 0) {
		syscall(SYS_execveat, ctx->init_fd, "", argv, envp,
			AT_EMPTY_PATH);
		err = errno;
		(void)!write(p[1], &err, sizeof(err));
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -errno;
	}
	if (read(p[0], &err, sizeof(err)) != sizeof(err))
		err = 0;
	close(p[0]);
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	if (err)
		return -err;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

const struct sbx_layers *spawn_probe(struct spawn_ctx *ctx)
{
	struct sbx_layers l;
	int r;

	memset(&l, 0, sizeof(l));
	if (layer_probe_layers(&l) < 0)
		snprintf(l.userns_why, sizeof(l.userns_why),
			 "probing the kernel failed");
	r = probe_run_init(ctx);
	l.run_init = r == 0;
	if (r < 0)
		snprintf(l.run_init_why, sizeof(l.run_init_why),
			 "sandboxd cannot execute a run's init from a sealed "
			 "memfd (%s): set vm.memfd_noexec to 0 or 1, or allow "
			 "memfd execution in the security module",
			 strerror(-r));
	ctx->layers = l;
	ctx->probed = true;
	return &ctx->layers;
}

/* sandboxd's side: the listener the run's init sent, or -1 when init
 * failed before it (its report says why).  init has sent it, or died,
 * by the time this is called after a shared-memory clone; after a fork
 * it blocks at most for init's uid maps and lo. */
static int recv_broker_listener(int sock)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char byte;
	struct iovec iov = {&byte, 1};
	struct msghdr mh;
	struct cmsghdr *cm;
	ssize_t n;
	int fd = -1;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n != 1 || (mh.msg_flags & MSG_CTRUNC))
		return -1;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* ---- sandboxd's side ------------------------------------------------------ */

static void refuse(struct sbxp_exited *e, enum sbxp_err code, const char *fmt,
		   ...) __attribute__((format(printf, 3, 4)));
static void refuse(struct sbxp_exited *e, enum sbxp_err code, const char *fmt,
		   ...)
{
	va_list ap;

	memset(e, 0, sizeof(*e));
	e->exit_code = -1;
	e->error = code;
	va_start(ap, fmt);
	vsnprintf(e->error_msg, sizeof(e->error_msg), fmt, ap);
	va_end(ap);
}

static void add_warning(struct spawn_run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_warning(struct spawn_run *run, const char *fmt, ...)
{
	va_list ap;

	if (run->info.nwarn >= SBXP_WARN_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(run->info.warn[run->info.nwarn++], SBXP_WARN_LEN, fmt, ap);
	va_end(ap);
}

static const struct sock_fprog *seccomp_filter(struct spawn_ctx *ctx,
					       enum sbx_net net, int *ret_err)
{
	struct sock_fprog *f;
	int r;

	if (ctx->filters[net])
		return ctx->filters[net];
	f = calloc(1, sizeof(*f));
	if (!f) {
		*ret_err = -ENOMEM;
		return NULL;
	}
	r = layer_seccomp_build(net, f);
	if (r < 0) {
		free(f);
		*ret_err = r;
		return NULL;
	}
	ctx->filters[net] = f;
	return f;
}

void spawn_prepare(struct spawn_ctx *ctx, uint32_t run_uid, uint32_t run_gid)
{
	uid_t uid = run_uid ? run_uid : SPAWN_RUN_UID_DEFAULT;
	gid_t gid = run_gid ? run_gid : SPAWN_RUN_GID_DEFAULT;
	int err, fd;

	for (int net = 0; net < SBX_NET__COUNT; net++)
		(void)seccomp_filter(ctx, (enum sbx_net)net, &err);
	if (!ctx->root)
		return;
	/* Kept in ctx's cache, as a run's would be. */
	if (ctx->layers.idmap_mounts)
		(void)userns_idmap(ctx, uid, gid, &fd);
	/* The spare's next (userns_run_ahead) is for this uid. */
	if (!ctx->run_userns_set) {
		ctx->run_userns_uid = uid;
		ctx->run_userns_gid = gid;
		ctx->run_userns_set = true;
	}
}

/* The environment, scrubbed again here so that a bug in spd cannot pass
 * a key on, with NO_COLOR=1.  Returns a malloc'd array borrowing v's
 * strings, and the run's PATH in *ret_path. */
static char **build_env(const struct sbxp_run_view *v, const char **ret_path)
{
	size_t n = 0;
	char **env;

	*ret_path = SPAWN_DEFAULT_PATH;
	while (v->lists[SBXP_L_ENV][n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	n = 0;
	for (size_t i = 0; v->lists[SBXP_L_ENV][i]; i++) {
		const char *e = v->lists[SBXP_L_ENV][i];

		/* A broker run keeps its turn key and the broker's URLs,
		 * checked by shape so that no real key passes as one. */
		if (v->msg->net == SBX_NET_BROKER &&
		    envscrub_broker_entry_ok(e, v->msg->broker_port)) {
			env[n++] = (char *)(uintptr_t)e;
			continue;
		}
		if (envscrub_entry_drop(e, NULL) || !strncmp(e, "NO_COLOR=", 9))
			continue;
		if (!strncmp(e, "PATH=", 5))
			*ret_path = e + 5;
		env[n++] = (char *)(uintptr_t)e;
	}
	env[n++] = (char *)"NO_COLOR=1";
	env[n] = NULL;
	return env;
}

/* The sockets layer_unix_sockets reports, collected before fork. */
struct sockets {
	char **v;
	size_t n;
};

static int collect_socket(const char *path, void *data)
{
	struct sockets *s = data;
	char **v;

	if (s->n >= SPAWN_SOCKETS_SCAN_MAX)
		return -E2BIG;
	v = realloc(s->v, (s->n + 2) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->v = v;
	if (!(v[s->n] = strdup(path)))
		return -ENOMEM;
	v[++s->n] = NULL;
	return 0;
}

static void sockets_free(struct sockets *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static const char *errstr(int err)
{
	return strerror(err < 0 ? -err : err);
}

/* ---- the spare (spare.h) ------------------------------------------------ */

void spawn_spare(struct spawn_ctx *ctx)
{
	userns_run_ahead(ctx);
	spare_make(ctx, ctx->heat_msg != NULL);
}

/* One run's start, carried through the steps of spawn_start. */
struct start {
	struct spawn_ctx *ctx;
	const struct sbxp_run_view *v;
	const struct sbxp_run *m;
	struct spawn_run *run;
	struct sbxp_exited *refusal;
	bool best, namespaces, use_landlock;
	bool quiet; /* a hot spare's (spawn_spare_heat): no trace stamps */
	struct child_args a;
	struct mountplan plan;
	struct sbx_landlock_plan ll;
	const char *read_paths[SBXP_RO_BINDS_MAX + 8];
	const char *fb_write[SBXP_PATHS_MAX + 4];
	char **env;
	int report[2], status[2], sync[2], bsock[2];
	int idmap_fd;
};

/* Root: the command's user namespace of its own (userns_run), or why
 * not: without it the run's process limit is not the run's alone. */
static int start_run_userns(struct start *s)
{
	int r = userns_run(s->ctx, s->a.run_uid, s->a.run_gid, &s->a.fd_userns);

	if (r == 0)
		return 0;
	s->a.fd_userns = -1;
	if (!s->best) {
		refuse(s->refusal, SBXP_ERR_UNAVAILABLE,
		       "process limit: a user namespace of the run's own: %s",
		       errstr(r));
		return r;
	}
	add_warning(s->run,
		    "process limit: a user namespace of the run's own: %s; "
		    "every process of uid %u on the host counts against the "
		    "run's limit",
		    errstr(r), s->a.run_uid);
	return 0;
}

/* Root: the run's uid and gid, and the idmapped mounts' user namespace
 * that shows them the operator's files as theirs. */
static int start_run_uid(struct start *s)
{
	struct spawn_ctx *ctx = s->ctx;
	const char *why;
	int r;

	s->a.root = true;
	s->a.run_uid = s->m->run_uid ? s->m->run_uid : SPAWN_RUN_UID_DEFAULT;
	s->a.run_gid = s->m->run_gid ? s->m->run_gid : SPAWN_RUN_GID_DEFAULT;
	r = ctx->layers.idmap_mounts
		? userns_idmap(ctx, s->a.run_uid, s->a.run_gid, &s->idmap_fd)
		: -EOPNOTSUPP;
	if (r < 0) {
		why = ctx->layers.idmap_mounts ? errstr(r)
					       : ctx->layers.idmap_why;
		if (!s->best) {
			refuse(s->refusal, SBXP_ERR_UNAVAILABLE,
			       "idmapped mounts: %s", why);
			return r;
		}
		s->idmap_fd = -1;
		add_warning(s->run,
			    "idmapped mounts: %s; the workspace may not be "
			    "writable by uid %u",
			    why, s->a.run_uid);
	}
	/* The run's own user namespace comes later (start_clone): a hot
	 * spare has one already. */
	return 0;
}

/* Fail closed: every layer that the host cannot give refuses the run,
 * unless it is best-effort, which runs with a warning.  Returns 0 or
 * -errno with the refusal filled in. */
static int start_layers(struct start *s)
{
	struct spawn_ctx *ctx = s->ctx;
	const struct sbx_layers *l = &ctx->layers;
	int err = 0;

	if (!ctx->root && !l->userns) {
		if (!s->best) {
			refuse(s->refusal, SBXP_ERR_UNAVAILABLE,
			       "user namespaces: %s", l->userns_why);
			return -EPERM;
		}
		s->namespaces = false;
		add_warning(s->run,
			    "user namespaces: %s; running without namespaces "
			    "or the mount plan, and background processes may "
			    "outlive the run",
			    l->userns_why);
	}
	/* Broker mode needs its own network namespace: without one the
	 * listener would be on the host's loopback, for anyone to use. */
	if (has_door(s->m->net) && !s->namespaces) {
		refuse(s->refusal, SBXP_ERR_UNAVAILABLE,
		       "broker/proxy network: needs a network namespace (%s)",
		       l->userns_why);
		return -EPERM;
	}
	if (l->landlock_abi <= 0) {
		if (!s->best) {
			refuse(s->refusal, SBXP_ERR_UNAVAILABLE, "Landlock: %s",
			       l->landlock_why);
			return -EPERM;
		}
		s->use_landlock = false;
		add_warning(s->run, "Landlock: %s; running without it",
			    l->landlock_why);
	}
	s->a.filter = seccomp_filter(ctx, (enum sbx_net)s->m->net, &err);
	if (!s->a.filter) {
		if (!s->best) {
			refuse(s->refusal, SBXP_ERR_UNAVAILABLE,
			       "seccomp: cannot build the filter (%s)",
			       errstr(err));
			return err;
		}
		add_warning(s->run, "seccomp: cannot build the filter (%s)",
			    errstr(err));
	}
	return ctx->root ? start_run_uid(s) : 0;
}

/* The command's argv, environment, directory and rlimits. */
static int start_args(struct start *s)
{
	static const int res[SBXP_RLIM__COUNT] = {
	    [SBXP_RLIM_NPROC] = RLIMIT_NPROC,
	    [SBXP_RLIM_NOFILE] = RLIMIT_NOFILE,
	    [SBXP_RLIM_FSIZE] = RLIMIT_FSIZE,
	    [SBXP_RLIM_CPU] = RLIMIT_CPU,
	    [SBXP_RLIM_AS] = RLIMIT_AS,
	};
	static const uint64_t defaults[SBXP_RLIM__COUNT] = {
	    [SBXP_RLIM_NPROC] = SPAWN_RLIM_NPROC,
	    [SBXP_RLIM_NOFILE] = SPAWN_RLIM_NOFILE,
	    [SBXP_RLIM_FSIZE] = SPAWN_RLIM_FSIZE,
	    [SBXP_RLIM_CPU] = SPAWN_RLIM_CPU,
	    [SBXP_RLIM_AS] = SPAWN_RLIM_AS,
	};
	const struct sbxp_run *m = s->m;
	struct child_args *a = &s->a;

	s->env = build_env(s->v, &a->path);
	if (!s->env) {
		refuse(s->refusal, SBXP_ERR_INTERNAL, "out of memory");
		return -ENOMEM;
	}
	a->argv = (char *const *)(uintptr_t)s->v->lists[SBXP_L_ARGV];
	a->envp = s->env;
	a->cwd = s->v->cwd[0] ? s->v->cwd : s->v->workspace;
	a->best_effort = s->best;
	a->loopback = m->net == SBX_NET_LOOPBACK || has_door(m->net);
	a->broker_port = (uint16_t)m->broker_port;
	for (int i = 0; i < SBXP_RLIM__COUNT; i++) {
		a->rl_res[i] = res[i];
		a->rl_val[i] = m->rlimits[i] ? m->rlimits[i] : defaults[i];
	}
	s->ll.read_paths = s->read_paths;
	s->ll.net = (enum sbx_net)m->net;
	s->ll.broker_port = (uint16_t)m->broker_port;
	s->ll.scope = true;
	return 0;
}

/* mountplan_build's error as the run's refusal. */
static void refuse_plan(struct start *s, int r)
{
	struct sbxp_exited *e = s->refusal;

	if (r == -E2BIG)
		refuse(e, SBXP_ERR_UNAVAILABLE,
		       "pathname Unix sockets: more than %d outside the "
		       "covered directories would need covering",
		       MOUNTPLAN_SOCKETS_MAX);
	else if (r == -EINVAL)
		refuse(e, SBXP_ERR_BAD_REQUEST,
		       "read-only bind: a source that is not a directory, or "
		       "a destination outside the workspace, through a "
		       "symlink or not a directory");
	else if (r == -SPD_ETOOBIG)
		refuse(e, SBXP_ERR_BAD_REQUEST,
		       "mount plan: more than %d mounts, or more than %d "
		       "entries in a directory a read-only bind rebuilds",
		       MOUNTPLAN_OPS_MAX, MOUNTPLAN_REBIND_MAX);
	else if (r == -ENOENT || r == -ENOTDIR)
		refuse(e, SBXP_ERR_BAD_REQUEST, "workspace %s: %s",
		       s->v->workspace, errstr(r));
	else
		refuse(e, SBXP_ERR_INTERNAL, "mount plan: %s", errstr(r));
}

/* Without namespaces (best-effort): Landlock alone bounds the writes. */
static void start_no_plan(struct start *s)
{
	const char *const *w = s->v->lists[SBXP_L_WRITABLE];
	size_t n = 0;

	s->fb_write[n++] = s->v->workspace;
	for (size_t i = 0; w[i]; i++)
		s->fb_write[n++] = w[i];
	s->fb_write[n++] = "/tmp";
	s->fb_write[n++] = "/dev";
	s->fb_write[n] = NULL;
	s->ll.write_paths = s->fb_write;
}

/* The mount plan, and the Landlock plan that mirrors it. */
static int start_plan(struct start *s)
{
	const struct sbxp_run_view *v = s->v;
	struct sockets socks = {0};
	int r;

	if (!s->namespaces) {
		start_no_plan(s);
		if (!s->quiet)
			trace_stamp("sockets");
		return 0;
	}
	/* Landlock cannot refuse connect() to a pathname socket and a
	 * read-only mount does not either: the plan covers each one bound
	 * outside what the run may use (docs/sandbox.md).  A scan that
	 * fails leaves them open, which only best-effort accepts. */
	if ((r = layer_unix_sockets(collect_socket, &socks)) < 0) {
		sockets_free(&socks);
		if (!s->best) {
			refuse(s->refusal, SBXP_ERR_UNAVAILABLE,
			       "pathname Unix sockets: cannot list them "
			       "(sock_diag, /proc/net/unix): %s",
			       errstr(r));
			return r;
		}
		add_warning(s->run,
			    "pathname Unix sockets: cannot list them (%s); "
			    "sockets outside /run and the known directories "
			    "stay reachable",
			    errstr(r));
	}
	if (!s->quiet)
		trace_stamp("sockets");
	struct mountplan_in in = {
	    .workspace = v->workspace,
	    .home = v->home,
	    .writable = v->lists[SBXP_L_WRITABLE],
	    .hidden = v->lists[SBXP_L_HIDDEN],
	    .readonly = v->lists[SBXP_L_READONLY],
	    .empty_files = v->lists[SBXP_L_EMPTY],
	    .net_host = s->m->net == SBX_NET_HOST,
	    .sockets = (const char *const *)socks.v,
	    .ro_binds = v->lists[SBXP_L_RO_BINDS],
	    .link_names = s->m->flags & SBXP_RUN_LINKS_LISTED
			      ? v->lists[SBXP_L_LINKS]
			      : NULL,
	    .link_ro_dirs = v->lists[SBXP_L_LINK_RO_DIRS],
	    .idmap_userns_fd = s->idmap_fd,
	};
	r = mountplan_build(&in, &s->plan);
	sockets_free(&socks);
	if (r < 0) {
		refuse_plan(s, r);
		return r;
	}
	s->a.plan = &s->plan;
	s->ll.write_paths = s->plan.write_paths;
	s->ll.private_tmp = true;
	/* "/" already covers them; listed anyway so that the Landlock plan
	 * mirrors the mount plan if reads are ever narrowed. */
	for (size_t i = 0;
	     i < s->plan.nread && i + 2 < ARRAY_SIZE(s->read_paths); i++)
		s->read_paths[i + 1] = s->plan.read_paths[i];
	return 0;
}

/* The report pipe, the broker's socketpair, and the rest of
 * what the child is handed. */
static int start_pipes(struct start *s)
{
	struct spawn_ctx *ctx = s->ctx;
	struct child_args *a = &s->a;
	int r;

	/* No fallback keeps a copy of sandboxd as pid 1: without its init
	 * nothing runs, best-effort or not. */
	if (!ctx->layers.run_init) {
		refuse(s->refusal, SBXP_ERR_UNAVAILABLE, "run init: %s",
		       ctx->layers.run_init_why);
		return -EPERM;
	}
	if (SPAWN_SHARED_VM && (!ctx->init_stack || !ctx->cmd_stack)) {
		refuse(s->refusal, SBXP_ERR_INTERNAL, "out of memory");
		return -ENOMEM;
	}
	if (pipe2(s->report, O_CLOEXEC) < 0 ||
	    (!SPAWN_SHARED_VM && pipe2(s->sync, O_CLOEXEC) < 0)) {
		r = -errno;
		refuse(s->refusal, SBXP_ERR_INTERNAL, "pipe: %s", errstr(r));
		return r;
	}
	if (has_door(s->m->net) &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s->bsock) <
		0) {
		r = -errno;
		refuse(s->refusal, SBXP_ERR_INTERNAL, "socketpair: %s",
		       errstr(r));
		return r;
	}
	a->fd_broker = s->bsock[1];
	a->fd_report = s->report[1];
	a->fd_init = ctx->init_fd;
	a->fd_sync = s->sync[0];
	a->cmd_stack = ctx->cmd_stack;
	a->scratch = ctx->links_scratch;
	if (s->namespaces && !ctx->root) {
		snprintf(a->uid_map, sizeof(a->uid_map), "%u %u 1\n", ctx->uid,
			 ctx->uid);
		snprintf(a->gid_map, sizeof(a->gid_map), "%u %u 1\n", ctx->gid,
			 ctx->gid);
	}
	return 0;
}

#if SPAWN_SHARED_VM
/* The run's init from a spare, hot or not (spare_take), stamped as such;
 * 0 when none fits. */
static pid_t start_spare(struct start *s, unsigned long flags, bool hot)
{
	pid_t pid = spare_take(s->ctx, &s->a, flags, hot, &s->report[1],
			       &s->status[0], s->report[0]);

	if (pid > 0)
		trace_stamp_at(hot ? "hot" : "spare", s->run->start_ns);
	return pid;
}
#endif

/* The run's init, from the spare or cloned into its namespaces.  Returns
 * its pid, once it has executed sandboxd-init or died (SPAWN_SHARED_VM),
 * or -errno. */
static pid_t start_clone(struct start *s)
{
	unsigned long flags = SIGCHLD;
	pid_t pid;

	if (s->namespaces) {
		flags |= CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			 CLONE_NEWUTS | CLONE_NEWCGROUP;
		if (!s->ctx->root)
			flags |= CLONE_NEWUSER;
		if (s->m->net != SBX_NET_HOST)
			flags |= CLONE_NEWNET;
	}
	spawn_steps_reset(trace_on());
	s->run->start_ns = spawn_now_ns();
#if SPAWN_SHARED_VM
	/* A hot spare heated for a run like this one first: it entered a
	 * user namespace of the run's at its HEAT.  Else a cold one, which
	 * needs the run's own. */
	if ((pid = start_spare(s, flags, true)) > 0)
		goto started;
#endif
	if (s->ctx->root && (pid = start_run_userns(s)) < 0)
		return pid;
#if SPAWN_SHARED_VM
	if ((pid = start_spare(s, flags, false)) > 0)
		goto started;
#endif
	/* Cloned anew: the status pipe (a spare's init holds its own). */
	if (pipe2(s->status, O_CLOEXEC) < 0) {
		int r = -errno;

		refuse(s->refusal, SBXP_ERR_INTERNAL, "pipe: %s", errstr(r));
		return r;
	}
	s->a.fd_status = s->status[1];
#if SPAWN_SHARED_VM
	pid = clone(child_init_entry, s->ctx->init_stack,
		    (int)(flags | CLONE_VM | CLONE_VFORK), &s->a);
#else
	pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid == 0)
		child_init(&s->a);
#endif
	if (pid < 0) {
		int r = -errno;

		refuse(s->refusal, SBXP_ERR_UNAVAILABLE,
		       "namespaces: clone: %s", errstr(r));
		return r;
	}
#if SPAWN_SHARED_VM
started:
#endif
	if (trace_on()) {
		trace_stamp_at("clone", s->run->start_ns);
		spawn_steps_flush("");
		trace_stamp("init_exec");
	}
	return pid;
}

/* Kills and reaps the run's init after a failure past its clone. */
static int start_abandon(struct start *s, pid_t pid, const char *what, int err)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	refuse(s->refusal, SBXP_ERR_INTERNAL, "%s: %s", what, errstr(err));
	return err;
}

/* sandboxd's side of the started run: its pidfd, the go-ahead of a
 * forked init, the broker's listener, the pipes' read ends. */
static int start_adopt(struct start *s, pid_t pid)
{
	struct spawn_run *run = s->run;

	if (s->report[1] >= 0)
		close(s->report[1]);
	if (s->status[1] >= 0)
		close(s->status[1]);
	s->report[1] = s->status[1] = -1;
	if (s->sync[0] >= 0)
		close(s->sync[0]);
	s->sync[0] = -1;
	run->pid = pid;
	run->pidfd = pidfd_open(pid, 0);
	if (run->pidfd < 0)
		return start_abandon(s, pid, "pidfd_open", -errno);
	if (s->sync[1] >= 0 && write(s->sync[1], "x", 1) != 1)
		return start_abandon(s, pid, "sync", -errno);
	if (s->bsock[0] >= 0) {
		close(s->bsock[1]);
		s->bsock[1] = -1;
		run->broker_fd = recv_broker_listener(s->bsock[0]);
	}
	fcntl(s->report[0], F_SETFL, O_NONBLOCK);
	fcntl(s->status[0], F_SETFL, O_NONBLOCK);
	run->report_fd = steal_fd(s->report[0]);
	run->status_fd = steal_fd(s->status[0]);
	run->own_pidns = s->namespaces;
	run->info.pid = pid;
	if (s->m->timeout_ms)
		run->deadline_ns =
		    run->start_ns + (uint64_t)s->m->timeout_ms * 1000000ull;
	if (s->namespaces) {
		char path[64];

		run->plan = s->plan;
		memset(&s->plan, 0, sizeof(s->plan));
		/* Best-effort: without it the teardown precedes EXITED. */
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
		run->mntns_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	return 0;
}

/* Closes what start opened and frees what it made; after a failure also
 * what the run was given. */
static void start_free(struct start *s, bool failed)
{
	struct spawn_run *run = s->run;

	for (int i = 0; i < 2; i++) {
		if (s->report[i] >= 0)
			close(s->report[i]);
		if (s->status[i] >= 0)
			close(s->status[i]);
		if (s->sync[i] >= 0)
			close(s->sync[i]);
		if (s->bsock[i] >= 0)
			close(s->bsock[i]);
	}
	if (failed) {
		if (run->pidfd >= 0)
			close(run->pidfd);
		run->pidfd = -1;
		if (run->broker_fd >= 0)
			close(run->broker_fd);
		run->broker_fd = -1;
	}
	if (s->a.fd_userns >= 0)
		close(s->a.fd_userns);
	mountplan_free(&s->plan);
	free(s->env);
}

/* A start of the run in v, whose descriptors (-1: none) and id are
 * given, into run (reset) and refusal. */
static void start_init(struct start *s, struct spawn_ctx *ctx,
		       const struct sbxp_run_view *v, struct spawn_run *run,
		       struct sbxp_exited *refusal, int out, int err, int in,
		       uint32_t id)
{
	*s = (struct start){
	    .ctx = ctx,
	    .v = v,
	    .m = v->msg,
	    .run = run,
	    .refusal = refusal,
	    .best = v->msg->flags & SBXP_RUN_BEST_EFFORT,
	    .namespaces = true,
	    .use_landlock = true,
	    .a = {.fd_out = out,
		  .fd_err = err,
		  .fd_in = in,
		  .fd_broker = -1,
		  .fd_status = -1,
		  .fd_report = -1,
		  .fd_init = -1,
		  .fd_sync = -1,
		  .fd_userns = -1},
	    .read_paths = {"/", NULL},
	    .report = {-1, -1},
	    .status = {-1, -1},
	    .sync = {-1, -1},
	    .bsock = {-1, -1},
	    .idmap_fd = -1,
	};
	memset(run, 0, sizeof(*run));
	run->id = id;
	run->pidfd = run->report_fd = run->status_fd = run->broker_fd = -1;
	run->mntns_fd = -1;
}

/* ---- the hot spare (spawn.h) -------------------------------------------- */

/* What a hot spare was set up for: a start of the last run's message,
 * as far as its plan, kept while the spare is hot (spare.c, hot_fits). */
struct spawn_hot {
	void *msg;
	struct sbxp_run_view v;
	struct spawn_run run; /* its warnings: one with any is not heated */
	struct sbxp_exited refusal;
	struct start s;
};

/* A run a spare can be set up for ahead: in namespaces of its own with a
 * network of its own and no listener, every layer on, nothing to warn
 * of, and a hard-link check that spd's list decides (a walk's outcome
 * cannot be checked again when the next run arrives). */
static bool heatable(const struct start *s)
{
	return s->namespaces && !s->best && s->use_landlock && s->a.filter &&
	       s->a.plan && s->run->info.nwarn == 0 &&
	       (s->m->net == SBX_NET_NONE || s->m->net == SBX_NET_LOOPBACK) &&
	       (s->plan.link_names || s->plan.nlink_roots == 0);
}

void spawn_hot_free(struct spawn_hot *h)
{
	if (!h)
		return;
	start_free(&h->s, false);
	sbxp_run_view_free(&h->v);
	free(h->msg);
	free(h);
}

int spawn_spare_wants_heat(const struct spawn_ctx *ctx)
{
	return ctx->heat_msg ? spare_to_heat(ctx) : -1;
}

void spawn_spare_heat(struct spawn_ctx *ctx)
{
#if SPAWN_SHARED_VM
	struct spawn_hot *h;

	if (spawn_spare_wants_heat(ctx) < 0 || !(h = calloc(1, sizeof(*h))))
		return;
	/* Once per run: a spare left cold is not heated again. */
	h->msg = ctx->heat_msg;
	ctx->heat_msg = NULL;
	if (sbxp_run_decode(h->msg, ctx->heat_len, &h->v) < 0)
		goto cold;
	start_init(&h->s, ctx, &h->v, &h->run, &h->refusal, -1, -1, -1, 0);
	h->s.quiet = true;
	if (start_layers(&h->s) < 0 || start_args(&h->s) < 0 ||
	    start_plan(&h->s) < 0 || !heatable(&h->s) ||
	    (ctx->root && start_run_userns(&h->s) < 0) ||
	    (ctx->root && h->s.a.fd_userns < 0))
		goto cold;
	h->s.a.landlock = &h->s.ll;
	h->s.a.scratch = ctx->links_scratch;
	h->s.a.plan_head_done = true;
	h->s.plan.links_list_only = true;
	if (spare_heat(ctx, h, &h->s.a) == 0) {
		/* Said at once: tests wait for it (test_sandbox_spare, hot_*). */
		trace_stamp("heated");
		trace_flush();
		/* The heat took the one made ahead. */
		userns_run_ahead(ctx);
		return;
	}
cold:
	spawn_hot_free(h);
	/* Not heated (spare_heat drops its spare itself when it fails). */
	spare_heat_drop(ctx);
#else
	(void)ctx;
#endif
}

/* Keeps the RUN body of a run a spare could be heated for (heatable). */
static void hot_remember(struct start *s)
{
	struct spawn_ctx *ctx = s->ctx;
	size_t len = sizeof(*s->m) + s->m->strtab_len;
	void *copy;

	free(ctx->heat_msg);
	ctx->heat_msg = NULL;
	if (!SPAWN_SHARED_VM || !heatable(s) || !(copy = malloc(len)))
		return;
	memcpy(copy, s->m, len);
	ctx->heat_msg = copy;
	ctx->heat_len = len;
}

int spawn_start(struct spawn_ctx *ctx, uint32_t id,
		const struct sbxp_run_view *v, int out_fd, int err_fd,
		int in_fd, struct spawn_run *run,
		struct sbxp_exited *ret_refusal)
{
	struct start s;
	pid_t pid;
	int r;

	trace_stamp("msg");
	start_init(&s, ctx, v, run, ret_refusal, out_fd, err_fd, in_fd, id);
	if (!ctx->probed)
		spawn_probe(ctx);
	if ((r = start_layers(&s)) < 0)
		goto out;
	trace_stamp("layers");
	if ((r = start_args(&s)) < 0 || (r = start_plan(&s)) < 0)
		goto out;
	if (s.use_landlock)
		s.a.landlock = &s.ll;
	trace_stamp("plan");
	if ((r = start_pipes(&s)) < 0)
		goto out;
	if ((pid = start_clone(&s)) < 0) {
		r = pid;
		goto out;
	}
	r = start_adopt(&s, pid);
	if (r == 0)
		hot_remember(&s);
out:
	start_free(&s, r < 0);
	return r;
}

/* The hard-link check refused the run (mount.h, MOUNTPLAN_STEP_LINKS):
 * name the limit and why, since the fix is on the operator's side. */
static void refuse_links(struct spawn_run *run, int err)
{
	enum sbxp_err code = SBXP_ERR_UNAVAILABLE;

	if (err == E2BIG)
		refuse(&run->refusal, code,
		       "hard links: the workspace and writable paths hold more "
		       "than %d entries, too many to check for hard links to "
		       "files outside them; the run is refused rather than "
		       "run with such a link writable",
		       MOUNTPLAN_LINKS_ENTRIES_MAX);
	else if (err == EMLINK)
		refuse(&run->refusal, code,
		       "hard links: more than %d names or directories in the "
		       "workspace would be made read-only (hard links to "
		       "files with a link outside it); copy the files instead "
		       "(pnpm: package-import-method=copy; uv: "
		       "UV_LINK_MODE=copy; git clone --local: git repack -a "
		       "-d)",
		       MOUNTPLAN_LINKS_MAX);
	else if (err == ELOOP)
		refuse(&run->refusal, code,
		       "hard links: the workspace is nested deeper than %d "
		       "directories, too deep to check for hard links to "
		       "files outside it",
		       MOUNTPLAN_LINKS_DEPTH_MAX);
	else if (err == EACCES)
		refuse(&run->refusal, code,
		       "hard links: a directory in the workspace can be "
		       "searched but not listed, so it cannot be checked for "
		       "hard links to files outside it");
	else
		refuse(&run->refusal, code,
		       "hard links: cannot check the workspace for hard links "
		       "to files outside it: %s",
		       strerror(err));
}

static void record_failure(struct spawn_run *run, const struct rec *rec)
{
	const char *name = rec->layer >= 0 && rec->layer < L__COUNT
			       ? layer_names[rec->layer]
			       : "setup";
	enum sbxp_err code = SBXP_ERR_UNAVAILABLE;

	if (rec->layer == L_SETUP || rec->layer == L_RLIMIT)
		code = SBXP_ERR_INTERNAL;
	if (rec->layer == L_CWD)
		code = SBXP_ERR_BAD_REQUEST;
	run->failed = true;
	if (rec->layer == L_MOUNT && rec->info == MOUNTPLAN_STEP_LINKS) {
		refuse_links(run, rec->err);
		return;
	}
	if (rec->layer == L_INIT)
		refuse(&run->refusal, code,
		       "%s: cannot execute sandboxd-init from its memfd: %s "
		       "(does vm.memfd_noexec forbid it?)",
		       name, strerror(rec->err));
	else if (rec->layer == L_MOUNT)
		refuse(&run->refusal, code, "%s: %s: %s", name,
		       mountplan_describe(&run->plan, rec->info),
		       strerror(rec->err));
	else
		refuse(&run->refusal, code, "%s: %s", name, strerror(rec->err));
}

int spawn_read_report(struct spawn_run *run)
{
	struct rec rec;
	ssize_t n;

	if (run->report_fd < 0)
		return 1;
	for (;;) {
		n = read(run->report_fd, &rec, sizeof(rec));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			break;
		if (n != sizeof(rec))
			continue;
		if (rec.kind == REC_WARN && rec.layer >= 0 &&
		    rec.layer < L__COUNT)
			add_warning(run, "%s: %s; running without it",
				    layer_names[rec.layer], strerror(rec.err));
		else if (rec.kind == REC_FAIL && !run->failed)
			record_failure(run, &rec);
		else if (rec.kind == REC_EXEC)
			run->exec_errno = rec.err;
	}
	close(run->report_fd);
	run->report_fd = -1;
	return 1;
}

void spawn_kill(struct spawn_run *run)
{
	run->killed = true;
	if (run->pidfd < 0)
		return;
	/* Killing init ends the pid namespace and everything in it.  Without
	 * one (best-effort), kill the session's process group too. */
	pidfd_send_signal(run->pidfd, SIGKILL, NULL, 0);
	if (!run->own_pidns)
		kill(-run->pid, SIGKILL);
}

void spawn_term(struct spawn_run *run)
{
	if (run->pidfd < 0)
		return;
	/* A pid namespace's init gets a signal from outside only when it
	 * handles it: sandboxd-init does SIGTERM, and passes it on to the
	 * command's process group.  Without a pid namespace, init and the
	 * command are one process group (child.c), init's pid its id. */
	if (run->own_pidns)
		pidfd_send_signal(run->pidfd, SIGTERM, NULL, 0);
	else
		kill(-run->pid, SIGTERM);
}

int spawn_read_status(struct spawn_run *run)
{
	struct rec rec;
	ssize_t n;

	if (run->have_status)
		return run->run_empty;
	do {
		n = read(run->status_fd, &rec, sizeof(rec));
	} while (n < 0 && errno == EINTR);
	if (n == 0)
		run->status_eof = true;
	if (n != sizeof(rec) || rec.kind != REC_STATUS)
		return 0;
	run->have_status = true;
	run->status = rec.info;
	/* Only init's word, and only with a pid namespace of the run's own
	 * (init checks that it is pid 1 too): without one, what the command
	 * left behind is not init's child. */
	run->run_empty = run->own_pidns && rec.layer == REC_STATUS_EMPTY;
	return run->run_empty;
}

static void wait_pidfd(int pidfd, siginfo_t *si)
{
	while (waitid(P_PIDFD, (id_t)pidfd, si, WEXITED) < 0 && errno == EINTR)
		;
}

static void spawn_wait_init(struct spawn_run *run, siginfo_t *si)
{
	memset(si, 0, sizeof(*si));
	if (run->reaped)
		return;
	wait_pidfd(run->pidfd, si);
	run->reaped = true;
}

void spawn_finish(struct spawn_run *run, struct sbxp_exited *ret)
{
	siginfo_t si;

	memset(ret, 0, sizeof(*ret));
	while (spawn_read_report(run) == 0)
		;
	/* A run that init reported empty is over: init, alone in it, only
	 * exits (spawn_release hands its pidfd to the caller, who reaps
	 * it once it has: spawn_reap_pidfd). */
	memset(&si, 0, sizeof(si));
	if (!(run->have_status && run->run_empty)) {
		spawn_wait_init(run, &si);
		if (!run->own_pidns)
			kill(-run->pid, SIGKILL);
		(void)spawn_read_status(run);
	}

	if (run->failed) {
		*ret = run->refusal;
	} else if (run->have_status && WIFEXITED(run->status)) {
		ret->exit_code = WEXITSTATUS(run->status);
		if (run->exec_errno)
			snprintf(ret->error_msg, sizeof(ret->error_msg),
				 "%s: %s", "exec", strerror(run->exec_errno));
	} else if (run->have_status && WIFSIGNALED(run->status)) {
		ret->exit_code = -1;
		ret->term_signal = WTERMSIG(run->status);
	} else if (run->timed_out || run->cancelled) {
		/* init was killed before it could say: by SIGKILL, or (before
		 * it could handle it, best-effort) by the CANCEL's SIGTERM. */
		ret->exit_code = -1;
		ret->term_signal = run->killed ? SIGKILL : SIGTERM;
	} else {
		refuse(ret, SBXP_ERR_INTERNAL,
		       "the run's init ended without a status (code %d, "
		       "status %d)",
		       si.si_code, si.si_status);
	}
	ret->timed_out = run->timed_out;
	ret->cancelled = run->cancelled;
	if (run->cancelled)
		ret->ended = run->killed ? SBXP_ENDED_KILL : SBXP_ENDED_TERM;
	ret->duration_us = (spawn_now_ns() - run->start_ns) / 1000;
}

int spawn_release(struct spawn_run *run, int *status_fd)
{
	int pidfd = run->pidfd;

	*status_fd = -1;
	if (pidfd < 0)
		return -1;
	mountplan_free(&run->plan);
	if (!run->reaped) {
		*status_fd = run->status_fd;
	} else {
		close(run->status_fd);
		close(pidfd);
		pidfd = -1;
	}
	run->pidfd = run->status_fd = -1;
	return pidfd;
}

void spawn_reap_pidfd(int pidfd)
{
	siginfo_t si;

	wait_pidfd(pidfd, &si);
	close(pidfd);
}
