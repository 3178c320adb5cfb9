/*
 * Starting, watching and ending one sandboxed run
 * (sandboxd/linux/spawn.h): namespaces, the mount plan, Landlock,
 * seccomp, capabilities, the uid switch, the run's init.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
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
#include "spawn.h"
#include "steps.h"

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
static char *stack_map(void)
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
	ctx->init_stack = stack_map();
	ctx->cmd_stack = stack_map();
	ctx->links_scratch = mountplan_scratch_new();
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

static void refuse(struct sbxp_exited *e, const char *code, const char *fmt,
		   ...) __attribute__((format(printf, 3, 4)));
static void refuse(struct sbxp_exited *e, const char *code, const char *fmt,
		   ...)
{
	va_list ap;

	memset(e, 0, sizeof(*e));
	e->exit_code = -1;
	snprintf(e->error_code, sizeof(e->error_code), "%s", code);
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

/*
 * A user namespace for MOUNT_ATTR_IDMAP in which the operator's uid (the
 * owner of the workspace on disk) is the run's uid: through such a mount
 * the run sees its workspace as its own, and what it creates is stored
 * as the operator's.  Made once per uid pair by a short-lived child and
 * kept open.
 */
static int idmap_userns(struct spawn_ctx *ctx, uid_t uid, gid_t gid,
			int *ret_fd)
{
	char umap[64], gmap[64], path[64];
	int p[2], fd = -1, r;
	pid_t pid;
	char c;

	for (size_t i = 0; i < ctx->nidmap; i++) {
		if (ctx->idmap[i].uid == uid && ctx->idmap[i].gid == gid) {
			*ret_fd = ctx->idmap[i].fd;
			return 0;
		}
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL,
			     NULL, NULL);
	if (pid < 0) {
		r = -errno;
		close(p[0]);
		close(p[1]);
		return r;
	}
	if (pid == 0) {
		/* Wait, doing nothing, until the parent has what it needs. */
		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	snprintf(umap, sizeof(umap), "%u %u 1\n", ctx->uid, uid);
	snprintf(gmap, sizeof(gmap), "%u %u 1\n", ctx->gid, gid);
	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	r = write_id_maps(pid, umap, gmap);
	if (r == 0) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
	}
	close(p[1]);
	waitpid(pid, NULL, 0);
	if (r < 0)
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
	*ret_fd = fd;
	return 0;
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

int spawn_start(struct spawn_ctx *ctx, uint32_t id,
		const struct sbxp_run_view *v, int out_fd, int err_fd,
		int in_fd, struct spawn_run *run,
		struct sbxp_exited *ret_refusal)
{
	const struct sbxp_run *m = v->msg;
	bool best = m->flags & SBXP_RUN_BEST_EFFORT;
	bool namespaces = true, use_landlock = true;
	struct child_args a = {
	    .fd_out = out_fd, .fd_err = err_fd, .fd_broker = -1};
	struct mountplan plan = {0};
	struct sbx_landlock_plan ll = {0};
	struct sockets socks = {0};
	const char *read_paths[SBXP_RO_BINDS_MAX + 8] = {"/", NULL};
	const char *fb_write[SBXP_PATHS_MAX + 4];
	char **env = NULL;
	int report[2] = {-1, -1}, status[2] = {-1, -1}, sync[2] = {-1, -1};
	int bsock[2] = {-1, -1};
	int idmap_fd = -1, err = 0, r;
	unsigned long flags;
	pid_t pid;

	trace_stamp("msg");
	a.fd_in = in_fd;
	memset(run, 0, sizeof(*run));
	run->id = id;
	run->pidfd = run->report_fd = run->status_fd = run->broker_fd = -1;
	if (!ctx->probed)
		spawn_probe(ctx);

	/* Fail closed: every layer that the host cannot give refuses the
	 * run, unless it is best-effort, which runs with a warning. */
	if (!ctx->root && !ctx->layers.userns) {
		if (!best) {
			refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
			       "user namespaces: %s", ctx->layers.userns_why);
			return -EPERM;
		}
		namespaces = false;
		add_warning(run,
			    "user namespaces: %s; running without namespaces "
			    "or the mount plan, and background processes may "
			    "outlive the run",
			    ctx->layers.userns_why);
	}
	/* Broker mode needs its own network namespace: without one the
	 * listener would be on the host's loopback, for anyone to use. */
	if (has_door(m->net) && !namespaces) {
		refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
		       "broker/proxy network: needs a network namespace (%s)",
		       ctx->layers.userns_why);
		return -EPERM;
	}
	if (ctx->layers.landlock_abi <= 0) {
		if (!best) {
			refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
			       "Landlock: %s", ctx->layers.landlock_why);
			return -EPERM;
		}
		use_landlock = false;
		add_warning(run, "Landlock: %s; running without it",
			    ctx->layers.landlock_why);
	}
	a.filter = seccomp_filter(ctx, (enum sbx_net)m->net, &err);
	if (!a.filter) {
		if (!best) {
			refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
			       "seccomp: cannot build the filter (%s)",
			       errstr(err));
			return err;
		}
		add_warning(run, "seccomp: cannot build the filter (%s)",
			    errstr(err));
	}
	if (ctx->root) {
		a.root = true;
		a.run_uid = m->run_uid ? m->run_uid : SPAWN_RUN_UID_DEFAULT;
		a.run_gid = m->run_gid ? m->run_gid : SPAWN_RUN_GID_DEFAULT;
		r = ctx->layers.idmap_mounts
			? idmap_userns(ctx, a.run_uid, a.run_gid, &idmap_fd)
			: -EOPNOTSUPP;
		if (r < 0) {
			const char *why = ctx->layers.idmap_mounts
					      ? errstr(r)
					      : ctx->layers.idmap_why;
			if (!best) {
				refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
				       "idmapped mounts: %s", why);
				return r;
			}
			idmap_fd = -1;
			add_warning(run,
				    "idmapped mounts: %s; the workspace may "
				    "not be writable by uid %u",
				    why, a.run_uid);
		}
	}

	trace_stamp("layers");
	env = build_env(v, &a.path);
	if (!env) {
		refuse(ret_refusal, SBXP_ERR_INTERNAL, "out of memory");
		return -ENOMEM;
	}
	a.argv = (char *const *)(uintptr_t)v->lists[SBXP_L_ARGV];
	a.envp = env;
	a.cwd = v->cwd[0] ? v->cwd : v->workspace;
	a.best_effort = best;
	a.loopback = m->net == SBX_NET_LOOPBACK || has_door(m->net);
	a.broker_port = (uint16_t)m->broker_port;
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
	for (int i = 0; i < SBXP_RLIM__COUNT; i++) {
		a.rl_res[i] = res[i];
		a.rl_val[i] = m->rlimits[i] ? m->rlimits[i] : defaults[i];
	}

	ll.read_paths = read_paths;
	ll.net = (enum sbx_net)m->net;
	ll.broker_port = (uint16_t)m->broker_port;
	ll.scope = true;
	/* Landlock cannot refuse connect() to a pathname socket and a
	 * read-only mount does not either: the plan covers each one bound
	 * outside what the run may use (docs/sandbox.md).  A scan that
	 * fails leaves them open, which only best-effort accepts. */
	if (namespaces &&
	    (r = layer_unix_sockets(collect_socket, &socks)) < 0) {
		sockets_free(&socks);
		if (!best) {
			refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
			       "pathname Unix sockets: cannot list them "
			       "(/proc/net/unix): %s",
			       errstr(r));
			goto out;
		}
		add_warning(run,
			    "pathname Unix sockets: cannot list them (%s); "
			    "sockets outside /run and the known directories "
			    "stay reachable",
			    errstr(r));
	}
	trace_stamp("sockets");
	if (namespaces) {
		struct mountplan_in in = {
		    .workspace = v->workspace,
		    .home = v->home,
		    .writable = v->lists[SBXP_L_WRITABLE],
		    .hidden = v->lists[SBXP_L_HIDDEN],
		    .readonly = v->lists[SBXP_L_READONLY],
		    .empty_files = v->lists[SBXP_L_EMPTY],
		    .net_host = m->net == SBX_NET_HOST,
		    .sockets = (const char *const *)socks.v,
		    .ro_binds = v->lists[SBXP_L_RO_BINDS],
		    .link_names = m->flags & SBXP_RUN_LINKS_LISTED
				      ? v->lists[SBXP_L_LINKS]
				      : NULL,
		    .idmap_userns_fd = idmap_fd,
		};
		r = mountplan_build(&in, &plan);
		sockets_free(&socks);
		if (r == -E2BIG) {
			refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
			       "pathname Unix sockets: more than %d outside "
			       "the covered directories would need covering",
			       MOUNTPLAN_SOCKETS_MAX);
			goto out;
		}
		if (r == -EINVAL) {
			refuse(ret_refusal, SBXP_ERR_BAD_REQUEST,
			       "read-only bind: a source that is not a "
			       "directory, or a destination outside the "
			       "workspace, through a symlink or not a "
			       "directory");
			goto out;
		}
		if (r == -SPD_ETOOBIG) {
			refuse(ret_refusal, SBXP_ERR_BAD_REQUEST,
			       "mount plan: more than %d mounts, or more than "
			       "%d entries in a directory a read-only bind "
			       "rebuilds",
			       MOUNTPLAN_OPS_MAX, MOUNTPLAN_REBIND_MAX);
			goto out;
		}
		if (r < 0) {
			if (r == -ENOENT || r == -ENOTDIR)
				refuse(ret_refusal, SBXP_ERR_BAD_REQUEST,
				       "workspace %s: %s", v->workspace,
				       errstr(r));
			else
				refuse(ret_refusal, SBXP_ERR_INTERNAL,
				       "mount plan: %s", errstr(r));
			goto out;
		}
		a.plan = &plan;
		ll.write_paths = plan.write_paths;
		/* "/" already covers them; listed anyway so that the Landlock
		 * plan mirrors the mount plan if reads are ever narrowed. */
		for (size_t i = 0;
		     i < plan.nread && i + 2 < ARRAY_SIZE(read_paths); i++)
			read_paths[i + 1] = plan.read_paths[i];
	} else {
		size_t n = 0;

		fb_write[n++] = v->workspace;
		for (size_t i = 0; v->lists[SBXP_L_WRITABLE][i]; i++)
			fb_write[n++] = v->lists[SBXP_L_WRITABLE][i];
		fb_write[n++] = "/tmp";
		fb_write[n++] = "/dev";
		fb_write[n] = NULL;
		ll.write_paths = fb_write;
	}
	if (use_landlock)
		a.landlock = &ll;
	trace_stamp("plan");

	/* No fallback keeps a copy of sandboxd as pid 1: without its init
	 * nothing runs, best-effort or not. */
	if (!ctx->layers.run_init) {
		r = -EPERM;
		refuse(ret_refusal, SBXP_ERR_UNAVAILABLE, "run init: %s",
		       ctx->layers.run_init_why);
		goto out;
	}
	if (SPAWN_SHARED_VM && (!ctx->init_stack || !ctx->cmd_stack)) {
		r = -ENOMEM;
		refuse(ret_refusal, SBXP_ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (pipe2(report, O_CLOEXEC) < 0 || pipe2(status, O_CLOEXEC) < 0 ||
	    (!SPAWN_SHARED_VM && pipe2(sync, O_CLOEXEC) < 0)) {
		r = -errno;
		refuse(ret_refusal, SBXP_ERR_INTERNAL, "pipe: %s", errstr(r));
		goto out;
	}
	if (has_door(m->net) &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, bsock) < 0) {
		r = -errno;
		refuse(ret_refusal, SBXP_ERR_INTERNAL, "socketpair: %s",
		       errstr(r));
		goto out;
	}
	a.fd_broker = bsock[1];
	a.fd_report = report[1];
	a.fd_status = status[1];
	a.fd_init = ctx->init_fd;
	a.fd_sync = sync[0];
	a.cmd_stack = ctx->cmd_stack;
	a.scratch = ctx->links_scratch;
	if (namespaces && !ctx->root) {
		snprintf(a.uid_map, sizeof(a.uid_map), "%u %u 1\n", ctx->uid,
			 ctx->uid);
		snprintf(a.gid_map, sizeof(a.gid_map), "%u %u 1\n", ctx->gid,
			 ctx->gid);
	}

	flags = SIGCHLD;
	if (namespaces) {
		flags |= CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			 CLONE_NEWUTS | CLONE_NEWCGROUP;
		if (!ctx->root)
			flags |= CLONE_NEWUSER;
		if (m->net != SBX_NET_HOST)
			flags |= CLONE_NEWNET;
	}
	spawn_steps_reset(trace_on());
	run->start_ns = spawn_now_ns();
#if SPAWN_SHARED_VM
	/* Returns once init has executed sandboxd-init, or died. */
	pid = clone(child_init_entry, ctx->init_stack,
		    flags | CLONE_VM | CLONE_VFORK, &a);
#else
	pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid == 0)
		child_init(&a);
#endif
	if (pid < 0) {
		r = -errno;
		refuse(ret_refusal, SBXP_ERR_UNAVAILABLE,
		       "namespaces: clone: %s", errstr(r));
		goto out;
	}
	if (trace_on()) {
		trace_stamp_at("clone", run->start_ns);
		spawn_steps_flush("");
		trace_stamp("init_exec");
	}

	close(report[1]);
	close(status[1]);
	report[1] = status[1] = -1;
	if (sync[0] >= 0)
		close(sync[0]);
	sync[0] = -1;
	run->pid = pid;
	run->pidfd = pidfd_open(pid, 0);
	if (run->pidfd < 0) {
		r = -errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		refuse(ret_refusal, SBXP_ERR_INTERNAL, "pidfd_open: %s",
		       errstr(r));
		goto out;
	}
	if (sync[1] >= 0 && write(sync[1], "x", 1) != 1) {
		r = -errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		refuse(ret_refusal, SBXP_ERR_INTERNAL, "sync: %s", errstr(r));
		goto out;
	}
	if (bsock[0] >= 0) {
		close(bsock[1]);
		bsock[1] = -1;
		run->broker_fd = recv_broker_listener(bsock[0]);
	}
	fcntl(report[0], F_SETFL, O_NONBLOCK);
	fcntl(status[0], F_SETFL, O_NONBLOCK);
	run->report_fd = steal_fd(report[0]);
	run->status_fd = steal_fd(status[0]);
	run->own_pidns = namespaces;
	run->info.pid = pid;
	if (m->timeout_ms)
		run->deadline_ns =
		    run->start_ns + (uint64_t)m->timeout_ms * 1000000ull;
	if (namespaces)
		run->plan = plan;
	else
		mountplan_free(&plan);
	free(env);
	if (sync[1] >= 0)
		close(sync[1]);
	for (int i = 0; i < 2; i++)
		if (bsock[i] >= 0)
			close(bsock[i]);
	return 0;
out:
	if (run->pidfd >= 0)
		close(run->pidfd);
	run->pidfd = -1;
	for (int i = 0; i < 2; i++) {
		if (report[i] >= 0)
			close(report[i]);
		if (status[i] >= 0)
			close(status[i]);
		if (sync[i] >= 0)
			close(sync[i]);
		if (bsock[i] >= 0)
			close(bsock[i]);
	}
	if (run->broker_fd >= 0)
		close(run->broker_fd);
	run->broker_fd = -1;
	mountplan_free(&plan);
	free(env);
	return r < 0 ? r : -EIO;
}

/* The hard-link check refused the run (mount.h, MOUNTPLAN_STEP_LINKS):
 * name the limit and why, since the fix is on the operator's side. */
static void refuse_links(struct spawn_run *run, int err)
{
	const char *code = SBXP_ERR_UNAVAILABLE;

	if (err == E2BIG)
		refuse(&run->refusal, code,
		       "hard links: the workspace and writable paths hold more "
		       "than %d entries, too many to check for hard links to "
		       "files outside them; the run is refused rather than "
		       "run with such a link writable",
		       MOUNTPLAN_LINKS_ENTRIES_MAX);
	else if (err == EMLINK)
		refuse(&run->refusal, code,
		       "hard links: more than %d names in the workspace and "
		       "writable paths are hard links to files with a link "
		       "outside them (each is made read-only for the run); "
		       "remove the links or copy the files",
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
	const char *code = SBXP_ERR_UNAVAILABLE;

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
	if (run->pidfd < 0)
		return;
	/* Killing init ends the pid namespace and everything in it.  Without
	 * one (best-effort), kill the session's process group too. */
	pidfd_send_signal(run->pidfd, SIGKILL, NULL, 0);
	if (!run->own_pidns)
		kill(-run->pid, SIGKILL);
}

void spawn_finish(struct spawn_run *run, struct sbxp_exited *ret)
{
	siginfo_t si;
	struct rec rec;
	bool have_status = false;
	ssize_t n;

	memset(ret, 0, sizeof(*ret));
	while (spawn_read_report(run) == 0)
		;
	memset(&si, 0, sizeof(si));
	while (waitid(P_PIDFD, (id_t)run->pidfd, &si, WEXITED) < 0 &&
	       errno == EINTR)
		;
	if (!run->own_pidns)
		kill(-run->pid, SIGKILL);
	do {
		n = read(run->status_fd, &rec, sizeof(rec));
	} while (n < 0 && errno == EINTR);
	if (n == sizeof(rec) && rec.kind == REC_STATUS)
		have_status = true;

	if (run->failed) {
		*ret = run->refusal;
	} else if (have_status && WIFEXITED(rec.info)) {
		ret->exit_code = WEXITSTATUS(rec.info);
		if (run->exec_errno)
			snprintf(ret->error_msg, sizeof(ret->error_msg),
				 "%s: %s", "exec", strerror(run->exec_errno));
	} else if (have_status && WIFSIGNALED(rec.info)) {
		ret->exit_code = -1;
		ret->term_signal = WTERMSIG(rec.info);
	} else if (run->timed_out || run->cancelled) {
		ret->exit_code = -1;
		ret->term_signal = SIGKILL;
	} else {
		refuse(ret, SBXP_ERR_INTERNAL,
		       "the run's init ended without a status (code %d, "
		       "status %d)",
		       si.si_code, si.si_status);
	}
	ret->timed_out = run->timed_out;
	ret->cancelled = run->cancelled;
	ret->duration_us = (spawn_now_ns() - run->start_ns) / 1000;
	close(run->pidfd);
	close(run->status_fd);
	run->pidfd = run->status_fd = -1;
	mountplan_free(&run->plan);
}
